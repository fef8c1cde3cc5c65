// Small DOM helpers. Text always goes in as text nodes, never as HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setAttributes(el, attrs) {
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else {
      el.setAttribute(key === 'className' ? 'class' : key, value === true ? '' : String(value));
    }
  }
}

function appendChildren(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** An HTML element: h('a', {href: '#/'}, 'Projects'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  appendChildren(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttributes(el, attrs);
  appendChildren(el, children);
  return el;
}

/** Replace a region's content, keeping keyboard focus on the element with the same id. */
export function fill(region, ...nodes) {
  const focused = document.activeElement;
  const focusedId = focused && region.contains(focused) ? focused.id : '';
  region.replaceChildren();
  appendChildren(region, nodes);
  if (focusedId) document.getElementById(focusedId)?.focus();
}

/** Tell screen reader users what changed. */
export function announce(message) {
  const live = document.getElementById('announce');
  if (live) live.textContent = message;
}

export function shortSha(sha) {
  return sha ? sha.slice(0, 12) : '—';
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60000);
  return `${minutes} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function bytes(count) {
  return `${Number(count).toLocaleString('en')} bytes`;
}

// Every status reads as words and a symbol; the colour only repeats it.
const STATUS = {
  running: ['◌', 'Running'],
  passed: ['✓', 'Passed'],
  failed: ['✗', 'Failed'],
  'infrastructure-error': ['⚠', 'Infrastructure error'],
  'timed-out': ['⏱', 'Timed out'],
  skipped: ['⤼', 'Skipped'],
  pending: ['·', 'Not started'],
  done: ['✓', 'Done'],
  signed: ['✓', 'Signed'],
  none: ['–', 'No receipt'],
  open: ['✓', 'Open'],
  closed: ['✗', 'Closed'],
};

export function statusLabel(status) {
  return (STATUS[status] ?? ['?', status])[1];
}

export function badge(status, extra) {
  const [symbol, label] = STATUS[status] ?? ['?', String(status)];
  return h('span', { class: `badge status-${status}`, 'data-status': status },
    h('span', { 'aria-hidden': 'true' }, symbol), ' ', label, extra ? ` ${extra}` : null);
}

/** A definition list from [term, value] pairs. */
export function facts(pairs) {
  return h('dl', { class: 'facts' },
    pairs.filter(Boolean).map(([term, value]) => [h('dt', null, term), h('dd', null, value)]));
}

/** A button that copies text, and says so. */
export function copyButton(text, label, id) {
  const button = h('button', { type: 'button', class: 'quiet copy', 'aria-label': label, id }, 'Copy');
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
      announce('Copied to the clipboard.');
    } catch {
      button.textContent = 'Copy failed: select the text';
    }
    setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  });
  return button;
}

export function errorBox(error, heading) {
  const reasons = error?.reasons ?? [];
  return h('div', { class: 'error', role: 'alert' },
    h('p', null, h('strong', null, heading ?? 'Refused: '), error?.message ?? String(error)),
    reasons.length ? reasonList(reasons) : null);
}

const REASON_CODES = new Set([
  'missing', 'stale', 'altered', 'incomplete', 'failed',
  'mocked-container-port', 'mocked-worker-loader', 'consent', 'checks-changed',
]);

/** Gate reasons "<code>: <sentence>" as a list, the code shown as a tag. */
export function reasonList(reasons) {
  return h('ul', { class: 'reasons' }, reasons.map((reason) => {
    const split = reason.indexOf(': ');
    const code = split > 0 ? reason.slice(0, split) : '';
    if (!REASON_CODES.has(code)) return h('li', null, reason);
    return h('li', null, h('span', { class: `code code-${code}` }, code), ' ', reason.slice(split + 2));
  }));
}

/** Run `task` now and again after the delay it returns (null stops); returns a stopper. */
export function repeat(task) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    if (stopped) return;
    const delay = await task();
    if (!stopped && delay) timer = setTimeout(tick, delay);
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** A table that becomes labelled rows on narrow screens. */
export function table(caption, headers, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h('table', { class: 'grid' },
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', null, h('tr', null, headers.map((name) => h('th', { scope: 'col' }, name)))),
    h('tbody', null, rows.map((cells) => h('tr', null, cells.map((cell, index) =>
      h('td', { 'data-label': headers[index] }, h('span', null, cell)))))));
}

export function section(id, title, ...children) {
  return h('section', { 'aria-labelledby': `${id}-title`, class: 'panel', id },
    h('h2', { id: `${id}-title` }, title), ...children);
}
