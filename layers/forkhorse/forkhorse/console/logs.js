// Bounded logs: each stream keeps its first and last 16 KiB; the viewer marks the cut.
import { bytes, h } from './dom.js';

/** The kept head and tail: the head is the first `droppedAt` original bytes. */
export function splitAtDrop(log) {
  if (!log.droppedBytes) return [log.text, ''];
  const encoder = new TextEncoder();
  let used = 0;
  let index = 0;
  for (const char of log.text) {
    const size = encoder.encode(char).length;
    if (used + size > log.droppedAt) break;
    used += size;
    index += char.length;
  }
  return [log.text.slice(0, index), log.text.slice(index)];
}

export function logViewer(checkName, stream, log) {
  if (!log || !log.totalBytes) return h('p', { class: 'muted log-empty' }, `${stream}: empty.`);
  const truncated = log.droppedBytes > 0;
  const [head, tail] = splitAtDrop(log);
  const caption = `${stream}: ${bytes(log.totalBytes)}`
    + (truncated ? `, ${bytes(log.droppedBytes)} dropped from the middle` : ', complete');
  const cut = truncated ? h('span', { class: 'cut', role: 'note' },
    `\n[… ${bytes(log.droppedBytes)} dropped here, original bytes ${log.droppedAt.toLocaleString('en')}`
    + ` to ${(log.droppedAt + log.droppedBytes).toLocaleString('en')}; the first and last 16 KiB are kept …]\n`)
    : null;
  return h('figure', { class: 'log', 'data-truncated': String(truncated) },
    h('figcaption', null, caption),
    h('pre', { tabindex: '0', 'aria-label': `${stream} of ${checkName}` }, head, cut, tail));
}
