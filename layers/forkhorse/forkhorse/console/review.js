// One review: its commit, receipt (and its entry in the transparency log), checks and logs,
// the gate's decision, how its checks differ from canonical's, the run's graph beside its
// latest promote execution, and the Flow-Next receipts attached to it.
import {
  announce, badge, copyButton, duration, errorBox, facts, fill, h, reasonList, repeat, section,
  shortSha, table, when,
} from './dom.js';
import { api, ApiError, get, paths } from './api.js';
import { graphSection } from './graph.js';
import { logViewer } from './logs.js';
import { flowSection } from './flow.js';
import { loadEnvelope, signatureFact } from './attestation.js';

const RUNNING_POLL_MS = 1000;
const IDLE_POLL_MS = 5000;
const PROMOTION_POLL_MS = 500;
// A promote execution in these states is still going: its graph is polled like a run's.
const OPEN_PROMOTION = ['queued', 'pending', 'writing'];
const SKIPPED = 'Skipped: a quick check failed.';

export function reviewPage(ctx, projectId, reviewId) {
  const page = new ReviewPage(ctx, projectId, reviewId);
  return page.start();
}

class ReviewPage {
  constructor(ctx, projectId, reviewId) {
    this.ctx = ctx;
    this.base = paths.review(projectId, reviewId);
    this.projectId = projectId;
    this.reviewId = reviewId;
    this.record = null; // {digest, receipt}: fetched again only when the digest changes
    this.openLogs = new Set();
    this.messages = { approve: null, promote: null };
    this.promoting = false;
    this.regions = {
      head: h('div', { id: 'review-head' }, h('h1', { tabindex: '-1' }, 'Review')),
      receipt: section('receipt', 'Receipt'),
      decision: section('decision', 'Approve and promote'),
      checksDiff: section('checks-diff', 'Checks against canonical'),
      checks: section('checks', 'Checks'),
      logs: section('logs', 'Check logs'),
      graph: section('graph', 'Execution graph'),
      flow: section('flow', 'Flow-Next review receipts'),
    };
  }

  start() {
    fill(this.ctx.main, Object.values(this.regions));
    this.first = true;
    return repeat(() => this.tick());
  }

  async tick() {
    try {
      await this.load();
    } catch (error) {
      if (!this.ctx.fail(error)) fill(this.regions.head, errorBox(error, 'Could not load the review: '));
      return null;
    }
    this.draw();
    if (this.first) this.ctx.ready();
    this.first = false;
    const running = this.review.receipt?.status === 'running'
      || OPEN_PROMOTION.includes(this.history.promote?.state);
    return running || this.promoting ? RUNNING_POLL_MS : IDLE_POLL_MS;
  }

  async load() {
    // The review by its id: /state lists only the active reviews.
    const [state, { review }, gate, history, flow] = await Promise.all([
      get(paths.state(this.projectId)), get(this.base), get(`${this.base}/gate`),
      get(`${this.base}/history`), get(`${this.base}/review-receipts`),
    ]);
    Object.assign(this, { state, review, gate, history, flow });
    const digest = review.receipt?.digest ?? null;
    if (digest && this.record?.digest !== digest) {
      [this.record, this.envelope] = await Promise.all([
        this.loadRecord(), loadEnvelope(`${this.base}/attestation`)]);
    }
  }

  async loadRecord() {
    this.recordRefusal = null;
    try {
      return await get(`${this.base}/receipt`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      // 409: the attached record fails its digest or the receipt schema (altered evidence).
      // The page still draws: the refusal under the receipt, the gate's reasons below.
      if (error instanceof ApiError && error.status === 409) {
        this.recordRefusal = error;
        return null;
      }
      throw error;
    }
  }

  draw() {
    const { regions, review } = this;
    this.ctx.title(`Review ${shortSha(review.id)}`);
    if (this.first) fill(regions.head, ...this.head());
    fill(regions.receipt, h('h2', { id: 'receipt-title' }, 'Receipt'), this.receiptSummary(),
      this.recordRefusal ? errorBox(this.recordRefusal, 'Record refused: ') : null);
    fill(regions.decision, h('h2', { id: 'decision-title' }, 'Approve and promote'), this.decision());
    fill(regions.checksDiff, h('h2', { id: 'checks-diff-title' }, 'Checks against canonical'),
      this.checksDiff());
    fill(regions.checks, h('h2', { id: 'checks-title' }, 'Checks'), this.checksTable());
    fill(regions.logs, h('h2', { id: 'logs-title' }, 'Check logs'), this.logs());
    fill(regions.graph, h('h2', { id: 'graph-title' }, 'Execution graph'),
      graphSection(this.history, review.receipt));
    fill(regions.flow, h('h2', { id: 'flow-title' }, 'Flow-Next review receipts'), flowSection(this.flow));
  }

  head() {
    const { state, review } = this;
    const packet = state.packets.find((candidate) => candidate.id === review.packetId);
    const fork = state.forks.find((candidate) => candidate.id === review.forkId);
    return [
      h('p', { class: 'crumbs' }, h('a', { href: `#/p/${encodeURIComponent(this.projectId)}` },
        `← ${state.project.name}`)),
      h('h1', { tabindex: '-1' }, `Review ${shortSha(review.id)}`),
      facts([
        ['Commit', h('code', { id: 'review-commit', class: 'wrap' }, review.commit)],
        ['Packet', packet ? packet.title : review.packetId],
        ['Fork', fork ? [fork.name, ' at ', h('code', { title: fork.head }, shortSha(fork.head))] : review.forkId],
      ]),
    ];
  }

  receiptSummary() {
    const receipt = this.review.receipt;
    if (!receipt) {
      return h('p', null, badge('none'), ' The commit declares no checks (no ', h('code', null, '.forkhorse/checks'), ').');
    }
    return facts([
      ['Status', h('span', { id: 'receipt-status' }, badge(receipt.status))],
      ['Trigger', receipt.trigger],
      ['Started', when(receipt.startedAt)],
      ['Finished', when(receipt.finishedAt)],
      ['Duration', duration(receipt.durationMs)],
      ['Digest', receipt.digest
        ? [h('code', { id: 'digest', class: 'wrap' }, receipt.digest), ' ', copyButton(receipt.digest, 'Copy the digest', 'copy-digest')]
        : h('span', { class: 'muted' }, receipt.status === 'running'
          ? 'None yet: the run is still going.' : 'None: no record was attached.')],
      receipt.digest ? signatureFact(this.envelope, `receipt-${shortSha(receipt.digest)}.dsse.json`) : null,
      receipt.digest ? ['Transparency log', this.logEntry()] : null,
    ]);
  }

  /** The link to the receipt's entry in the log (its JSON, the bundle and leaf hash). */
  logEntry() {
    const entry = this.review.logEntry;
    if (!entry) return h('span', { id: 'log-entry', class: 'muted' }, 'Not in this deployment\'s log yet.');
    return h('a', { id: 'log-entry', href: paths.logEntry(entry.index) }, `log entry #${entry.index}`);
  }

  // --- the gate ------------------------------------------------------------------------
  decision() {
    const { gate, review } = this;
    const required = gate.mode === 'required';
    return [
      h('p', { id: 'gate-mode' }, h('strong', null, `Mode: ${gate.mode}. `), required
        ? 'Approve needs fresh, passing, real evidence for this exact commit; promote reruns every check first.'
        : 'Receipts are advisory: approve and promote ignore them, and promote starts no checks.'),
      this.action('approve', 'Approve', `Approve commit ${shortSha(gate.commit)}`, gate.approve,
        review.approval && review.approval.commit === gate.commit
          ? `Approved ${when(review.approval.approvedAt)} in ${review.approval.mode} mode.` : null,
        'The gate accepts approval of this commit now.'),
      this.action('promote', 'Promote', 'Promote to canonical main', gate.promote,
        review.promotion ? `Promoted ${when(review.promotion.promotedAt)}: canonical moved from `
          + `${shortSha(review.promotion.from)} to ${shortSha(review.promotion.to)}.` : null,
        required ? 'Promote will rerun every check (trigger before-promote) and is refused with 409 if they do not pass.'
          : 'Promote will fast-forward canonical without running checks.'),
    ];
  }

  action(key, verb, label, verdict, done, allowedText) {
    const button = h('button', {
      type: 'button', id: `${key}-button`, class: 'primary',
      'aria-describedby': `${key}-gate`, disabled: this.promoting,
    }, label);
    button.addEventListener('click', () => this.run(key));
    // Only a checks change is in the way: the owner may accept exactly that change.
    const acceptable = key === 'approve' && !verdict.allowed && verdict.reasons.length
      && verdict.reasons.every((reason) => reason.startsWith('checks-changed: '));
    const accept = acceptable ? h('button', {
      type: 'button', id: 'accept-approve-button', 'aria-describedby': 'approve-gate checks-diff-title',
      disabled: this.promoting,
    }, 'Accept the checks change and approve') : null;
    accept?.addEventListener('click', () => this.run(key, true));
    const explanation = verdict.allowed
      ? h('p', { class: 'ok' }, allowedText)
      : [h('p', null, `${verb} would be refused now, because:`), reasonList(verdict.reasons)];
    return h('div', { class: 'action', id: `${key}-panel` },
      done ? h('p', { class: 'done', id: `${key}-done` }, badge('passed'), ' ', done) : null,
      button, accept ? ' ' : null, accept,
      h('div', { id: `${key}-gate`, class: 'gate' }, explanation),
      h('div', { id: `${key}-result`, 'aria-live': 'polite' }, this.messages[key]));
  }

  async run(key, acceptChecksChange = false) {
    const commit = this.gate.commit;
    try {
      if (key === 'approve') {
        const body = acceptChecksChange ? { commit, acceptChecksChange } : { commit };
        const { data } = await api('POST', `${this.base}/approve`, body);
        const accepted = data.approval.acceptedChecksChange.map((change) => change.check);
        this.say(key, h('p', { class: 'ok' }, `Approved commit ${shortSha(data.approval.commit)} (${data.approval.mode} mode)`
          + `${accepted.length ? `, accepting the change of ${accepted.join(', ')}` : ''}.`));
      } else {
        await this.promote(commit);
      }
    } catch (error) {
      if (this.ctx.fail(error)) return;
      this.say(key, errorBox(error, `${key === 'approve' ? 'Approve' : 'Promote'} refused: `));
    } finally {
      this.promoting = false;
    }
    await this.tick();
  }

  async promote(commit) {
    this.promoting = true;
    this.say('promote', h('p', null, badge('running'), ' Promoting…',
      this.gate.mode === 'required' ? ' The before-promote checks are running.' : ''));
    this.draw();
    let { status, data } = await api('POST', `${this.base}/promote`, { commit });
    while (status === 202) {
      await new Promise((resolve) => { setTimeout(resolve, PROMOTION_POLL_MS); });
      ({ status, data } = await api('GET', `${this.base}/promotion`));
    }
    const promotion = data.promotion;
    this.say('promote', h('p', { class: 'ok' }, `Promoted: canonical moved from ${shortSha(promotion.from)} `
      + `to ${shortSha(promotion.to)} (${promotion.mode} mode${promotion.digest ? `, digest ${shortSha(promotion.digest)}` : ''}).`));
  }

  say(key, node) {
    this.messages[key] = node;
    announce(node.textContent);
  }

  // --- the checks diff against canonical ----------------------------------------------
  checksDiff() {
    const { checks } = this.gate;
    const intro = h('p', { id: 'checks-policy' }, checks.enforced
      ? 'Canonical\'s checks are protected: each removed or changed check needs your explicit acceptance.'
      : 'Canonical\'s checks are not protected here: the checks below are the commit\'s own, so read any change before approving.');
    if (checks.canonicalHead === null) {
      return [intro, h('p', { class: 'muted empty' }, 'Canonical has no head yet, so there is nothing to compare.')];
    }
    const rows = checks.diff.map((entry) => [
      h('span', { class: 'check-name' }, entry.check),
      h('span', { class: `change change-${entry.change}` }, entry.change),
      entry.protected ? 'Needs acceptance' : 'Shown only',
      declared(entry.before),
      declared(entry.after),
    ]);
    return [intro, table(`Checks that differ from canonical ${shortSha(checks.canonicalHead)}`,
      ['Check', 'Change', 'Protected', `Canonical ${shortSha(checks.canonicalHead)}`, 'This commit'], rows,
      `The commit's checks are the same as canonical's (${shortSha(checks.canonicalHead)}).`)];
  }

  // --- checks and logs -----------------------------------------------------------------
  checks() {
    return this.record?.receipt.checks ?? this.review.receipt?.checks ?? [];
  }

  checksTable() {
    const rows = this.checks().map((check) => {
      const skipped = check.tier === 'full' && check.message === SKIPPED && check.durationMs === null;
      return [
        h('span', { class: 'check-name' }, check.name),
        check.tier,
        [check.runtime ?? 'container (legacy)', check.platform ? h('span', { class: 'muted small' }, ` on ${check.platform}`) : null],
        skipped ? [badge('skipped'), h('span', { class: 'muted small' }, ' counted as failed')] : badge(check.outcome),
        duration(check.durationMs),
        check.message ?? '',
      ];
    });
    const loading = this.review.receipt?.status === 'running' ? 'The check definitions are loading.' : 'No checks ran.';
    return table('Checks of this receipt', ['Check', 'Tier', 'Runtime', 'Outcome', 'Duration', 'Message'], rows, loading);
  }

  logs() {
    if (!this.record) {
      return h('p', { class: 'muted' }, 'Logs appear once a record is attached to the receipt.');
    }
    return this.record.receipt.checks.map((check) => {
      const details = h('details', { class: 'log-check', 'data-check': check.name, open: this.openLogs.has(check.name) },
        h('summary', null, `Logs of ${check.name} `, badge(check.outcome)),
        logViewer(check.name, 'stdout', check.stdout),
        logViewer(check.name, 'stderr', check.stderr));
      details.addEventListener('toggle', () => {
        if (details.open) this.openLogs.add(check.name);
        else this.openLogs.delete(check.name);
      });
      return details;
    });
  }
}

/** One check as a commit declares it: its declaration and, for a quick check, its module's digest. */
function declared(check) {
  if (!check) return h('span', { class: 'muted' }, 'not declared');
  return [
    h('pre', { class: 'declaration' }, JSON.stringify(check.definition, null, 1)),
    check.moduleDigest ? h('code', { class: 'wrap', title: check.moduleDigest }, `module ${shortSha(check.moduleDigest.replace('module:sha256:', ''))}`) : null,
  ];
}
