// The run's execution graph, from Step Functions-shaped history events (local or AWS):
// prepare, each quick check, the quick gate, each full check, finalize. Beside it, the
// review's latest promote execution: acquire, the nested before-promote run, verify,
// write, and release (or settle, when it was refused or failed).
import { badge, duration, h, s, statusLabel } from './dom.js';

const SKIPPED = 'Skipped: a quick check failed.';

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null; // details are truncated for long runs
  }
}

/** Each state's first entry and last exit, keyed by name (map iterations as name#index). */
function spans(events) {
  const found = new Map();
  const span = (key) => found.get(key) ?? found.set(key, {}).get(key);
  for (const event of [...events].sort((a, b) => a.id - b.id)) {
    const at = Date.parse(event.timestamp);
    const entered = event.stateEnteredEventDetails;
    const exited = event.stateExitedEventDetails;
    const iteration = event.mapIterationStartedEventDetails;
    const iterationEnd = event.mapIterationSucceededEventDetails
      ?? event.mapIterationFailedEventDetails ?? event.mapIterationAbortedEventDetails;
    if (entered) span(entered.name).start ??= at;
    if (exited) Object.assign(span(exited.name), { end: at, output: exited.output });
    if (iteration) span(`${iteration.name}#${iteration.index}`).start ??= at;
    if (iterationEnd) span(`${iterationEnd.name}#${iterationEnd.index}`).end = at;
    if (event.type.startsWith('Execution')) span('Execution')[event.type] = at;
  }
  return found;
}

function timing(span) {
  if (!span?.start) return { ms: null, running: false };
  return { ms: span.end ? span.end - span.start : null, running: !span.end };
}

function checkNames(summary, prepared, tier) {
  const fromSummary = (summary?.checks ?? []).filter((check) => check.tier === tier);
  if (fromSummary.length) return fromSummary;
  return (prepared?.[tier] ?? []).map((definition) => ({ name: definition.name, tier }));
}

function gateState(span, quick) {
  const output = parse(span?.output ?? '');
  const closed = output?.closed ?? output?.quickGate?.closed;
  if (closed === true) return 'closed';
  if (closed === false) return 'open';
  if (!span?.start) return 'pending';
  return quick.every((node) => node.status === 'passed') ? 'open' : 'closed';
}

function stepStatus(span, failedWhen) {
  if (!span?.start) return 'pending';
  if (!span.end) return 'running';
  return failedWhen ? 'failed' : 'done';
}

function checkStatus(check, span) {
  if (check.message === SKIPPED && check.durationMs === null) return 'skipped';
  if (check.outcome) return check.outcome;
  return stepStatus(span, false);
}

/** The graph's nodes, in execution order. */
export function runGraph(events, summary) {
  const found = spans(events);
  const prepare = found.get('Prepare');
  const prepared = parse(prepare?.output ?? '');
  const nodes = [{ key: 'prepare', label: 'Prepare', kind: 'step',
    status: stepStatus(prepare, prepared?.discovery === 'invalid'), ...timing(prepare) }];
  const quick = checkNames(summary, prepared, 'quick').map((check, index) => {
    const span = found.get(`QuickChecks#${index}`);
    return { key: `quick-${index}`, label: check.name, kind: 'quick',
      status: checkStatus(check, span), ...timing(span) };
  });
  nodes.push(...quick);
  if (quick.length) {
    const span = found.get('QuickGate');
    nodes.push({ key: 'gate', label: 'Quick gate', kind: 'gate', status: gateState(span, quick), ...timing(span) });
  }
  checkNames(summary, prepared, 'full').forEach((check, index) => {
    const span = found.get(`FullChecks#${index}`);
    nodes.push({ key: `full-${index}`, label: check.name, kind: 'full',
      status: checkStatus(check, span), ...timing(span) });
  });
  const infra = found.get('FinalizeInfrastructureError');
  const finalize = infra ?? found.get('Finalize');
  nodes.push({ key: 'finalize', label: infra ? 'Finalize (infrastructure error)' : 'Finalize',
    kind: 'step', status: infra ? 'infrastructure-error' : stepStatus(finalize, false), ...timing(finalize) });
  return nodes;
}

// The promote machine's states; the nested run is BeforePromoteRun on AWS, RunChecks locally.
const PROMOTE_STATES = [
  ['acquire', 'Acquire lease', ['Acquire']],
  ['start-run', 'Reserve run', ['StartRun']],
  ['run', 'Before-promote run', ['BeforePromoteRun', 'RunChecks']],
  ['verify', 'Verify', ['Verify']],
  ['write', 'Write canonical', ['Write']],
];
// A promotion's state as a status badge: open states run; an uncertain write is fenced.
const PROMOTION_STATUS = { queued: 'pending', pending: 'running', writing: 'running',
  uncertain: 'infrastructure-error', done: 'done', failed: 'failed' };
const ENDINGS = ['ExecutionSucceeded', 'ExecutionFailed', 'ExecutionAborted', 'ExecutionTimedOut'];

/** A promote state: never entered is pending (skipped once the execution ended); entered
 * and not left is running (failed once the execution ended). */
function promoteStatus(span, ended) {
  if (!span?.start) return ended ? 'skipped' : 'pending';
  if (!span.end) return ended ? 'failed' : 'running';
  return 'done';
}

/** The promote graph's nodes, in execution order. */
export function promoteGraph(events) {
  const found = spans(events);
  const ended = ENDINGS.some((type) => found.get('Execution')?.[type]);
  const node = (key, label, span, kind) => ({ key: `promote-${key}`, label, kind,
    status: promoteStatus(span, ended), ...timing(span) });
  const nodes = PROMOTE_STATES.map(([key, label, names]) => node(key, label,
    names.map((name) => found.get(name)).find(Boolean), key === 'run' ? 'run' : 'step'));
  const settle = found.get('Settle');
  nodes.push(settle
    ? { ...node('settle', 'Settle (refused or failed)', settle, 'step'), status: settle.end ? 'failed' : 'running' }
    : node('release', 'Release lease', found.get('Release'), 'step'));
  return nodes;
}

const KIND_LABEL = { step: 'step', quick: 'quick check', gate: 'choice', full: 'full check', run: 'nested run' };
const NODE_HEIGHT = 44;
const GAP = 26;
const WIDTH = 340;

function nodeText(node) {
  const took = node.running ? 'running' : duration(node.ms);
  return `${statusLabel(node.status)} · ${took}`;
}

/** A vertical SVG flow: one box per state, an arrow between, text on every box. */
export function graphSvg(nodes, name = 'graph') {
  const height = nodes.length * (NODE_HEIGHT + GAP) - GAP + 4;
  const parts = nodes.map((node, index) => {
    const y = 2 + index * (NODE_HEIGHT + GAP);
    const arrow = index ? s('path', { class: 'edge', d: `M${WIDTH / 2} ${y - GAP + 1} V${y - 3}`,
      'marker-end': 'url(#arrow)' }) : null;
    const shape = node.kind === 'gate'
      ? s('polygon', { class: 'box', points: `12,${y + NODE_HEIGHT / 2} 24,${y} ${WIDTH - 24},${y} ${WIDTH - 12},${y + NODE_HEIGHT / 2} ${WIDTH - 24},${y + NODE_HEIGHT} 24,${y + NODE_HEIGHT}` })
      : s('rect', { class: 'box', x: 2, y, width: WIDTH - 4, height: NODE_HEIGHT, rx: node.kind === 'step' ? 4 : 14 });
    return [arrow, s('g', { class: `node status-${node.status}`, 'data-key': node.key, 'data-status': node.status },
      s('title', null, `${node.label} (${KIND_LABEL[node.kind]}): ${nodeText(node)}`),
      shape,
      s('text', { x: 30, y: y + 18, class: 'name' }, node.label),
      s('text', { x: 30, y: y + 35, class: 'detail' }, `${KIND_LABEL[node.kind]} · ${nodeText(node)}`))];
  });
  return s('svg', { class: 'graph', viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height,
    role: 'img', 'aria-labelledby': `${name}-desc` },
  s('desc', { id: `${name}-desc` }, nodes.map((node) => `${node.label}: ${nodeText(node)}`).join('; ')),
  s('defs', null, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
    markerWidth: 8, markerHeight: 8, orient: 'auto' },
  s('path', { d: 'M0 0 L10 5 L0 10 z', class: 'arrowhead' }))),
  parts);
}

/** Where the events come from, and on AWS a link to the execution's console page. */
function sourceLine(history, what) {
  if (history.source !== 'step-functions') {
    return h('p', { class: 'muted' }, 'From the local supervisor’s execution history.');
  }
  return h('p', null, 'From Step Functions GetExecutionHistory. ',
    history.consoleUrl ? h('a', { href: history.consoleUrl, rel: 'noreferrer', target: '_blank' },
      `Open this ${what} in the Step Functions console`) : null);
}

/** The review's latest promote execution; nothing before its first promote. */
function promoteFigure(history) {
  const promote = history.promote;
  if (!promote) return null;
  const body = promote.events.length
    ? h('div', { class: 'graph-wrap' }, graphSvg(promoteGraph(promote.events), 'promote-graph'))
    : h('p', { class: 'muted' }, 'No execution history yet: the promote has not recorded a state.');
  return h('figure', { class: 'execution', id: 'promote-execution', 'data-state': promote.state },
    h('figcaption', null, h('h3', null, 'Promote execution'), ' ',
      badge(PROMOTION_STATUS[promote.state] ?? promote.state), h('span', { class: 'muted' }, ` promotion ${promote.state}`)),
    sourceLine({ ...promote, source: history.source }, 'promote execution'), body);
}

function runFigure(history, summary) {
  const body = history.events.length
    ? h('div', { class: 'graph-wrap' }, graphSvg(runGraph(history.events, summary)))
    : h('p', { class: 'muted', id: 'graph-empty' }, summary
      ? 'No execution history yet: the run has not recorded a state.'
      : 'No execution: this review has no receipt run.');
  return h('figure', { class: 'execution', id: 'run-execution' },
    h('figcaption', null, h('h3', null, 'Receipt run')), sourceLine(history, 'execution'), body);
}

export function graphSection(history, summary) {
  return h('div', { class: 'executions' }, runFigure(history, summary), promoteFigure(history));
}
