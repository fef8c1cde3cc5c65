// The run's execution graph, from Step Functions-shaped history events (local or AWS):
// prepare, each quick check, the quick gate, each full check, finalize.
import { duration, h, s, statusLabel } from './dom.js';

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

const KIND_LABEL = { step: 'step', quick: 'quick check', gate: 'choice', full: 'full check' };
const NODE_HEIGHT = 44;
const GAP = 26;
const WIDTH = 340;

function nodeText(node) {
  const took = node.running ? 'running' : duration(node.ms);
  return `${statusLabel(node.status)} · ${took}`;
}

/** A vertical SVG flow: one box per state, an arrow between, text on every box. */
export function graphSvg(nodes) {
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
    role: 'img', 'aria-labelledby': 'graph-desc' },
  s('desc', { id: 'graph-desc' }, nodes.map((node) => `${node.label}: ${nodeText(node)}`).join('; ')),
  s('defs', null, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
    markerWidth: 8, markerHeight: 8, orient: 'auto' },
  s('path', { d: 'M0 0 L10 5 L0 10 z', class: 'arrowhead' }))),
  parts);
}

export function graphSection(history, summary) {
  const source = history.source === 'step-functions'
    ? h('p', null, 'From Step Functions GetExecutionHistory. ',
      history.consoleUrl ? h('a', { href: history.consoleUrl, rel: 'noreferrer', target: '_blank' },
        'Open this execution in the Step Functions console') : null)
    : h('p', { class: 'muted' }, 'From the local supervisor’s execution history.');
  if (!history.events.length) {
    return [source, h('p', { class: 'muted', id: 'graph-empty' }, summary
      ? 'No execution history yet: the run has not recorded a state.'
      : 'No execution: this review has no receipt run.')];
  }
  return [source, h('div', { class: 'graph-wrap' }, graphSvg(runGraph(history.events, summary)))];
}
