// Signed evidence in the console: "signed" with the key id beside the digest, and the DSSE
// envelope to download for `forkhorse verify` (or openssl; see docs/signed-evidence.md).
import { badge, h, shortSha } from './dom.js';
import { ApiError, get } from './api.js';

/** The envelope at `path`, or null when nothing is signed there (404). */
export async function loadEnvelope(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** The "Signature" fact: signed by which key, and a download of the envelope. */
export function signatureFact(envelope, filename) {
  if (!envelope) return ['Signature', h('span', { id: 'signature', class: 'muted' }, 'Not signed.')];
  const keyids = envelope.signatures.map((signature) => signature.keyid);
  const download = h('a', {
    id: 'download-attestation', class: 'button quiet', download: filename,
    href: URL.createObjectURL(new Blob([JSON.stringify(envelope, null, 2)], { type: 'application/json' })),
  }, 'Download the envelope');
  return ['Signature', [
    h('span', { id: 'signature' }, badge('signed'), ' with key ',
      h('code', { id: 'signing-key', title: keyids.join(', ') }, keyids.map(shortSha).join(', '))),
    ' ', download,
  ]];
}
