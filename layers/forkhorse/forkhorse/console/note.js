// The log's checkpoint checked in this browser with WebCrypto: a C2SP signed note whose
// type 0x02 signature (ECDSA P-256 over SHA-256) the log's key made. The key ID is the
// first four bytes of SHA-256 over the key's DER SubjectPublicKeyInfo; the signature is
// ASN.1 DER, which WebCrypto takes as raw r || s (c2sp.org/signed-note, c2sp.org/tlog-checkpoint).

const DASH = '\u2014';
const SCALAR = 32; // bytes of r and of s on P-256
const utf8 = new TextEncoder();

export class NoteRefused extends Error {}

function fromBase64(text) {
  let binary;
  try {
    binary = atob(text);
  } catch {
    throw new NoteRefused('A signature or the root is not base64.');
  }
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

export function hex(bytes) {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

function pemBody(pem) {
  return fromBase64(pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''));
}

/** One DER INTEGER of a signature as SCALAR big-endian bytes, and where the next starts. */
function scalar(der, at) {
  const length = der[at + 1];
  if (der[at] !== 0x02 || length === undefined || length > SCALAR + 1 || at + 2 + length > der.length) {
    throw new NoteRefused('The signature is not an ECDSA P-256 signature.');
  }
  let value = der.subarray(at + 2, at + 2 + length);
  while (value.length > SCALAR && value[0] === 0) value = value.subarray(1);
  if (value.length > SCALAR) throw new NoteRefused('The signature is not an ECDSA P-256 signature.');
  const padded = new Uint8Array(SCALAR);
  padded.set(value, SCALAR - value.length);
  return [padded, at + 2 + length];
}

/** A DER ECDSA signature (SEQUENCE of INTEGER r, INTEGER s) as WebCrypto's raw r || s. */
export function rawSignature(der) {
  if (der[0] !== 0x30 || der[1] !== der.length - 2) {
    throw new NoteRefused('The signature is not an ECDSA P-256 signature.');
  }
  const [r, next] = scalar(der, 2);
  const [s, end] = scalar(der, next);
  if (end !== der.length) throw new NoteRefused('The signature is not an ECDSA P-256 signature.');
  const raw = new Uint8Array(2 * SCALAR);
  raw.set(r);
  raw.set(s, SCALAR);
  return raw;
}

function split(note) {
  const cut = note.lastIndexOf('\n\n');
  if (cut < 0 || !note.endsWith('\n')) throw new NoteRefused('The checkpoint is not a signed note.');
  return [note.slice(0, cut + 1), note.slice(cut + 2, -1).split('\n')];
}

function signatureLine(line) {
  const parts = line.split(' ');
  if (parts.length !== 3 || parts[0] !== DASH) throw new NoteRefused('The checkpoint has a line that is not a signature.');
  const raw = fromBase64(parts[2]);
  if (raw.length < 5) throw new NoteRefused('A signature is shorter than its key ID.');
  return [parts[1], raw.subarray(0, 4), raw.subarray(4)];
}

/** The checkpoint's origin, size and root (hex) once the log's key {origin, publicKey}
 * verifies its signature, and that key's ID (hex); NoteRefused says what failed. */
export async function verifyCheckpoint(note, key) {
  if (!globalThis.crypto?.subtle) {
    throw new NoteRefused('This page is not a secure context (HTTPS or loopback), so the browser cannot check signatures.');
  }
  const [text, lines] = split(note);
  const spki = pemBody(key.publicKey);
  const keyId = new Uint8Array(await crypto.subtle.digest('SHA-256', spki)).subarray(0, 4);
  const publicKey = await crypto.subtle.importKey('spki', spki, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify']);
  let verified = false;
  for (const line of lines) {
    const [name, id, signature] = signatureLine(line);
    if (name !== key.origin || hex(id) !== hex(keyId)) continue; // another key's: ignored
    const ok = await crypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, publicKey,
      rawSignature(signature), utf8.encode(text));
    if (!ok) throw new NoteRefused(`The signature of ${key.origin} does not verify.`);
    verified = true;
  }
  if (!verified) throw new NoteRefused(`The checkpoint carries no signature of ${key.origin}.`);
  const [origin, size, root] = text.split('\n');
  if (origin !== key.origin || !/^(0|[1-9][0-9]*)$/.test(size)) {
    throw new NoteRefused('The signed text is not a checkpoint of this log.');
  }
  return { origin, size: Number(size), root: hex(fromBase64(root)), keyId: hex(keyId) };
}
