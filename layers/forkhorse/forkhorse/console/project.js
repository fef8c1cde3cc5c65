// One project: the receipt mode, the checks policy, reviews with live badges, packets, forks
// and the ledger.
import {
  announce, badge, copyButton, facts, fill, h, repeat, section, shortSha, table, when,
} from './dom.js';
import { api, get, paths } from './api.js';

const RUNNING_POLL_MS = 1000;
const IDLE_POLL_MS = 4000;

export function projectPage(ctx, projectId) {
  const regions = {
    head: h('div', { id: 'project-head' }, h('h1', { tabindex: '-1' }, 'Project')),
    settings: section('settings', 'Receipt mode'),
    policy: section('policy', 'Checks policy'),
    reviews: section('reviews', 'Reviews'),
    history: section('history', 'All reviews'),
    packets: section('packets', 'Packets and claims'),
    forks: section('forks', 'Forks'),
    ledger: section('ledger', 'Promotion ledger'),
    wholeLedger: section('whole-ledger', 'Whole ledger'),
  };
  fill(ctx.main, Object.values(regions));
  const toggle = settingsControl(ctx, projectId, regions.settings);
  const policy = policyControl(ctx, projectId, regions.policy);
  historyControl(ctx, projectId, regions.history);
  wholeLedgerControl(ctx, projectId, regions.wholeLedger);
  let first = true;
  return repeat(async () => {
    let state;
    try {
      state = await get(paths.state(projectId));
    } catch (error) {
      if (!ctx.fail(error)) fill(regions.head, h('p', { class: 'error', role: 'alert' }, error.message));
      return null;
    }
    drawProject(ctx, regions, state);
    toggle.show(state.project.settings.requireReceipt);
    policy.show(state.project.policy.protectChecks);
    if (first) ctx.ready();
    first = false;
    const running = state.reviews.some((review) => review.receipt?.status === 'running');
    return running ? RUNNING_POLL_MS : IDLE_POLL_MS;
  });
}

function drawProject(ctx, regions, state) {
  const { project } = state;
  ctx.title(project.name);
  const head = facts([
    ['Canonical head', h('code', { id: 'canonical-head', class: 'wrap' }, project.canonicalHead ?? 'empty')],
    ['Clone URL', [h('code', { class: 'wrap' }, project.cloneUrl), ' ',
      copyButton(project.cloneUrl, 'Copy the clone URL', 'copy-clone-url')]],
  ]);
  // Redrawn only when canonical moves, so focus and selection in the header survive polls.
  if (regions.head.dataset.canonical !== String(project.canonicalHead)) {
    fill(regions.head, h('h1', { tabindex: '-1' }, project.name), head);
    regions.head.dataset.canonical = String(project.canonicalHead);
  }
  fill(regions.reviews, h('h2', { id: 'reviews-title' }, 'Reviews'), reviewTable(project.id, state));
  fill(regions.packets, h('h2', { id: 'packets-title' }, 'Packets and claims'), packetList(state.packets));
  fill(regions.forks, h('h2', { id: 'forks-title' }, 'Forks'), forkTable(state.forks));
  fill(regions.ledger, h('h2', { id: 'ledger-title' }, 'Promotion ledger'), ledgerTable(project.id, state.ledger));
}

const MODE_TEXT = {
  true: 'Approve accepts only fresh, passing, complete, real (not mocked) evidence '
    + 'for the exact commit, and promote reruns every check (trigger before-promote); if that '
    + 'run does not pass, promote is refused with “Checks failed before promote.”',
  false: 'Checks still run and their results stay visible, failures included, but '
    + 'approve and promote ignore them. Promote starts no checks; the ledger keeps the digest '
    + 'known at the moment of promotion.',
};

function settingsControl(ctx, projectId, region) {
  return switchControl(ctx, region, {
    id: 'require-receipt',
    prefix: 'mode',
    label: 'Require receipts before approve and promote',
    describe: (required) => [h('strong', null, required ? 'Mode: required. ' : 'Mode: advisory. '),
      MODE_TEXT[required]],
    save: async (wanted) => (await api('PATCH', paths.settings(projectId), { requireReceipt: wanted }))
      .data.settings.requireReceipt,
    saved: (wanted) => `Saved: receipts are now ${wanted ? 'required' : 'advisory'}.`,
    help: 'A change applies to later approve and promote calls. Turning it on also gates an '
      + 'already-approved review: its next promote must pass a new required run.',
  });
}

const POLICY_TEXT = {
  true: 'In required mode, a review whose commit removes or changes a check that canonical '
    + 'declares (its declaration or its quick module) is refused with checks-changed until you '
    + 'accept exactly that change when approving. Added checks need no acceptance.',
  false: 'The checks come from the reviewed commit, as the spec says: read the checks diff on '
    + 'each review before approving.',
};

function policyControl(ctx, projectId, region) {
  return switchControl(ctx, region, {
    id: 'protect-checks',
    prefix: 'policy',
    label: "Protect canonical's checks from removal or change",
    describe: (protect) => [h('strong', null, protect ? 'Checks are protected. ' : 'Checks are not protected. '),
      POLICY_TEXT[protect]],
    save: async (wanted) => (await api('PUT', paths.policy(projectId), { protectChecks: wanted }))
      .data.policy.protectChecks,
    saved: (wanted) => `Saved: canonical's checks are ${wanted ? 'now protected' : 'no longer protected'}.`,
  });
}

// A switch that saves itself: it shows the stored value, saves a change and says what happened.
function switchControl(ctx, region, { id, prefix, label, describe, save, saved, help }) {
  const input = h('input', {
    id, type: 'checkbox', role: 'switch',
    'aria-describedby': help ? `${prefix}-now ${prefix}-help` : `${prefix}-now`,
  });
  const now = h('p', { id: `${prefix}-now`, class: 'mode' });
  const status = h('div', { id: `${prefix}-status` });
  let pending = false;
  const show = (value) => {
    if (pending) return;
    input.checked = value;
    fill(now, describe(value));
  };
  input.addEventListener('change', async () => {
    pending = true;
    input.disabled = true;
    const wanted = input.checked;
    try {
      const value = await save(wanted);
      pending = false;
      show(value);
      const message = saved(wanted);
      fill(status, h('p', { class: 'ok' }, message));
      announce(message);
    } catch (error) {
      pending = false;
      show(!wanted);
      if (!ctx.fail(error)) fill(status, h('p', { class: 'error', role: 'alert' }, error.message));
    }
    input.disabled = false;
    input.focus();
  });
  region.append(
    h('div', { class: 'check switch' }, input, h('label', { for: id }, label)),
    now,
    ...(help ? [h('p', { id: `${prefix}-help`, class: 'muted' }, help)] : []),
    status);
  return { show };
}

function checkProgress(receipt) {
  if (!receipt) return '—';
  const done = receipt.checks.filter((check) => check.outcome !== 'running').length;
  const passed = receipt.checks.filter((check) => check.outcome === 'passed').length;
  if (!receipt.checks.length) return receipt.status === 'running' ? 'loading definitions' : 'none';
  return `${passed} of ${receipt.checks.length} passed${done < receipt.checks.length ? `, ${receipt.checks.length - done} running` : ''}`;
}

// A listing /state holds only part of (the active reviews, the newest promotions), a page
// at a time, newest first. Not redrawn by polls, so loaded pages stay.
function pagedControl(ctx, region, { key, intro, first, more, noun, path, items, draw }) {
  const rows = h('div', { id: `${key}-rows` });
  const status = h('div', { id: `${key}-status` });
  const button = h('button', { type: 'button', id: `more-${key}` }, first);
  let loaded = [];
  let cursor = null;
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const page = await get(path(cursor));
      loaded = loaded.concat(items(page));
      cursor = page.next;
      fill(rows, draw(loaded));
      announce(`${loaded.length} ${noun} shown${cursor ? '; more are older' : ''}.`);
      fill(status);
      button.textContent = more;
      button.hidden = !cursor;
    } catch (error) {
      if (!ctx.fail(error)) fill(status, h('p', { class: 'error', role: 'alert' }, error.message));
    }
    button.disabled = false;
  });
  region.append(h('p', { class: 'muted' }, intro), rows, status, button);
}

function historyControl(ctx, projectId, region) {
  pagedControl(ctx, region, {
    key: 'history',
    intro: 'Reviews above are the active ones: each fork and packet’s newest. '
      + 'Older reviews stay readable here.',
    first: 'Show every review',
    more: 'Show older reviews',
    noun: 'reviews',
    path: (cursor) => paths.reviews(projectId, cursor),
    items: (page) => page.reviews,
    draw: (loaded) => reviewTable(projectId, { reviews: loaded }),
  });
}

function wholeLedgerControl(ctx, projectId, region) {
  pagedControl(ctx, region, {
    key: 'whole-ledger',
    intro: 'The ledger above holds the newest promotions. Every promotion stays readable here, '
      + 'newest first.',
    first: 'Show the whole ledger',
    more: 'Show older promotions',
    noun: 'promotions',
    path: (cursor) => paths.ledger(projectId, cursor),
    items: (page) => page.ledger,
    draw: (loaded) => ledgerTable(projectId, loaded),
  });
}

function reviewTable(projectId, state) {
  const rows = state.reviews.map((review) => [
    h('a', { href: `#/p/${encodeURIComponent(projectId)}/r/${encodeURIComponent(review.id)}` },
      `Review ${shortSha(review.id)}`),
    h('code', { title: review.commit }, shortSha(review.commit)),
    review.receipt ? [badge(review.receipt.status), h('span', { class: 'muted small' }, ` ${review.receipt.trigger}`)]
      : badge('none'),
    checkProgress(review.receipt),
    review.approval ? `Approved (${review.approval.mode}) ${shortSha(review.approval.commit)}` : 'Not approved',
    review.promotion ? `Promoted ${when(review.promotion.promotedAt)}` : 'Not promoted',
  ]);
  return table('Reviews and their receipts',
    ['Review', 'Commit', 'Receipt', 'Checks', 'Approval', 'Promotion'], rows,
    'No reviews yet. Agents request them after pushing to a fork.');
}

function packetList(packets) {
  const rows = packets.map((packet) => [
    packet.title,
    packet.claim ? `Claimed by ${packet.claim.agentId}` : 'Unclaimed',
    packet.claim ? when(packet.claim.expiresAt) : '—',
  ]);
  return table('Packets and their claims', ['Packet', 'Claim', 'Claim expires'], rows, 'No packets yet.');
}

function forkTable(forks) {
  const rows = forks.map((fork) => [
    fork.name,
    fork.owner,
    h('code', { title: fork.head ?? 'empty' }, shortSha(fork.head)),
  ]);
  return table('Forks and their heads', ['Fork', 'Owner', 'Head'], rows, 'No forks yet.');
}

function ledgerTable(projectId, ledger) {
  const rows = ledger.map((entry) => [
    when(entry.promotedAt),
    h('code', { title: entry.commit }, shortSha(entry.commit)),
    h('code', { title: entry.from ?? 'empty' }, shortSha(entry.from)),
    entry.digest ? h('code', { title: entry.digest }, shortSha(entry.digest)) : 'none (advisory)',
    entry.acceptedChecksChange.length
      ? entry.acceptedChecksChange.map((change) => `${change.check} ${change.change}`).join(', ')
      : '—',
    h('a', { href: `#/p/${encodeURIComponent(projectId)}/r/${encodeURIComponent(entry.reviewId)}` },
      `Review ${shortSha(entry.reviewId)}`),
  ]);
  return table('Promotions of canonical',
    ['Promoted', 'Commit', 'From', 'Digest', 'Accepted checks change', 'Review'], rows,
    'Nothing promoted yet.');
}
