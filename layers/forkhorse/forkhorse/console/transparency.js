// The transparency log's panel: the tree its newest checkpoint signs (size and root), the
// entries not signed yet, the deployment's last self-check, and that checkpoint's signature
// checked in this browser.
import { badge, copyButton, errorBox, facts, fill, h, section, when } from './dom.js';
import { ApiError, get, paths } from './api.js';
import { verifyCheckpoint } from './note.js';

const SHORT_ROOT = 16;

/** The panel; it fills itself in once `GET /log` answers. */
export function logPanel(ctx) {
  const body = h('div', { id: 'log-body' }, h('p', { class: 'muted' }, 'Loading the log…'));
  const panel = section('transparency-log', 'Transparency log', body);
  get(paths.log()).then((status) => {
    const signature = h('span', { id: 'log-signature' }, status.root ? 'Checking…' : '—');
    fill(body, ...logFacts(status, signature));
    return status.root ? signatureCheck(signature) : null;
  }).catch((error) => {
    if (ctx.fail(error)) return;
    if (error instanceof ApiError && error.status === 404) {
      fill(body, h('p', { class: 'muted' }, error.message));
    } else {
      fill(body, errorBox(error, 'Could not read the log: '));
    }
  });
  return panel;
}

function entries(count) {
  return `${Number(count).toLocaleString('en')} ${count === 1 ? 'entry' : 'entries'}`;
}

function logFacts(status, signature) {
  return [
    h('p', null, 'Every receipt, approval, promotion, settings or policy change and canonical import is appended to this log; anyone can check it from its signed checkpoint and tiles under ',
      h('code', null, '/log/'), '.'),
    facts([
      ['Origin', h('code', { id: 'log-origin', class: 'wrap' }, status.origin ?? '—')],
      ['Signed size', h('span', { id: 'log-size' }, entries(status.size))],
      ['Not signed yet', h('span', { id: 'log-pending' }, entries(status.pending))],
      ['Root', rootView(status.root)],
      ['Signature', signature],
      ['Last self-check', selfCheck(status.lastCheck)],
    ]),
  ];
}

function rootView(root) {
  if (!root) return h('span', { id: 'log-root', class: 'muted' }, 'None: no checkpoint is signed yet.');
  return [
    h('code', { id: 'log-root', title: root }, `${root.slice(0, SHORT_ROOT)}…`), ' ',
    copyButton(root, 'Copy the root', 'copy-root'),
    h('details', { class: 'full-value' }, h('summary', null, 'Full root'),
      h('code', { id: 'log-root-full', class: 'wrap' }, root)),
  ];
}

function selfCheck(check) {
  if (!check) return h('span', { id: 'log-check', class: 'muted' }, 'Not run yet.');
  const size = check.size === null ? 'no checkpoint' : `on the tree of ${entries(check.size)}`;
  return h('div', { id: 'log-check' },
    badge(check.ok ? 'passed' : 'failed'), ' ', h('span', { id: 'log-check-at' }, when(check.at)), `, ${size}`,
    check.problems.length
      ? h('ul', { id: 'log-problems', class: 'reasons' }, check.problems.map((problem) => h('li', null, problem)))
      : null);
}

/** Fetches the checkpoint and the key and shows in `target` whether the signature verifies
 * here (against the key this server publishes: `forkhorse verify-log` pins it). */
async function signatureCheck(target) {
  try {
    const [key, note] = await Promise.all([get(paths.logKey()), checkpointText()]);
    const signed = await verifyCheckpoint(note, key);
    fill(target, badge('signed'), ` and verified in this browser with key ${signed.keyId}: the tree of ${entries(signed.size)}, root `,
      h('code', { title: signed.root }, `${signed.root.slice(0, SHORT_ROOT)}…`));
  } catch (error) {
    fill(target, badge('failed'), ' ', error.message);
  }
}

async function checkpointText() {
  const response = await fetch(paths.logCheckpoint(), { credentials: 'omit', cache: 'no-store' });
  if (!response.ok) throw new Error(`The checkpoint could not be read (${response.status}).`);
  return response.text();
}
