// Flow-Next review receipts: the verdict, findings by severity (introduced vs pre-existing),
// and each fallback state labelled as the contract says.
import { h } from './dom.js';

const FINDINGS = {
  current: ['Current', 'Structured findings for this review head; safe to read as they are.'],
  stale: ['Stale evidence', 'Kept as stale evidence; it is not the current record for this head.'],
  unsupported: ['Unsupported', 'Unsupported version or invalid data: the structured findings are '
    + 'ignored; read the verdict and the reviewer’s prose. Unsupported data is never a pass.'],
  ambiguous: ['Ambiguous lineage', 'The lineage is ambiguous: the structured findings are ignored; '
    + 'read the verdict and the reviewer’s prose.'],
  absent: ['No structured findings', 'The receipt carries no findings field: use its verdict and prose.'],
};

function item(finding) {
  const where = finding.anchor ? ` (${finding.anchor.path}:${finding.anchor.startLine})` : '';
  return h('li', null, h('span', { class: 'code' }, finding.status), ' ', finding.title, where,
    h('span', { class: 'muted small' }, ` confidence ${finding.confidence}`));
}

function split(title, findings) {
  if (!findings.length) return null;
  return h('div', { class: 'split' }, h('h5', null, `${title} (${findings.length})`),
    h('ul', null, findings.map(item)));
}

function groups(classification) {
  const used = classification.groups.filter((group) => group.introduced.length || group.pre_existing.length);
  if (!used.length) {
    return h('p', null, 'No findings: the reviewer returned an explicit empty list for this generation.');
  }
  return used.map((group) => h('section', { class: 'severity', 'aria-label': `Severity ${group.severity}` },
    h('h4', null, `${group.severity}`),
    split('Introduced', group.introduced),
    split('Pre-existing', group.pre_existing)));
}

function receiptCard(stored, index) {
  const c = stored.classification;
  const [label, meaning] = FINDINGS[c.findings] ?? [c.findings, ''];
  const structured = c.findings === 'current' || c.findings === 'stale';
  return h('article', { class: `flow-receipt findings-${c.findings}`, 'aria-labelledby': `flow-${index}` },
    h('h3', { id: `flow-${index}` }, `${c.type ?? 'receipt'} · ${c.mode ?? 'unknown mode'}`),
    h('p', null, 'Verdict: ', h('strong', { class: `verdict verdict-${c.verdict}` }, c.verdict ?? 'none')),
    h('p', null, h('span', { class: `findings-label label-${c.findings}` }, label), ` — ${meaning}`,
      c.reason ? h('span', { class: 'muted' }, ` (${c.reason})`) : null),
    structured ? h('div', { class: c.findings === 'stale' ? 'stale-findings' : '' }, groups(c)) : null,
    h('details', null, h('summary', null, 'The receipt and its prose'),
      h('pre', { tabindex: '0' }, JSON.stringify(stored.receipt, null, 2))));
}

export function flowSection(data) {
  if (!data.receipts.length) {
    return h('p', { class: 'muted empty' },
      'No Flow-Next review receipts are attached to this review yet. The requesting agent attaches them.');
  }
  return data.receipts.map(receiptCard);
}
