// The owner's projects, a form to create one, and the deployment's transparency log.
import { announce, fill, h, shortSha, table } from './dom.js';
import { api, get, paths } from './api.js';
import { logPanel } from './transparency.js';

export function projectsPage(ctx) {
  ctx.title('Projects');
  const list = h('div', { id: 'project-list' }, h('p', { class: 'muted' }, 'Loading projects…'));
  fill(ctx.main, h('h1', { tabindex: '-1' }, 'Projects'), list, createForm(ctx), logPanel(ctx));
  get(paths.projects()).then((data) => {
    fill(list, projectTable(data.projects));
    ctx.ready();
  }).catch((error) => {
    if (!ctx.fail(error)) fill(list, h('p', { class: 'error', role: 'alert' }, error.message));
  });
  return () => {};
}

function projectTable(projects) {
  const rows = projects.map((project) => [
    h('a', { href: `#/p/${encodeURIComponent(project.id)}` }, project.name),
    project.settings.requireReceipt ? 'Required' : 'Advisory',
    h('code', { title: project.canonicalHead ?? 'empty' }, shortSha(project.canonicalHead)),
  ]);
  return table('Your projects', ['Project', 'Receipts', 'Canonical head'], rows,
    'No projects yet. Create one below.');
}

function createForm(ctx) {
  const name = h('input', { id: 'new-project-name', name: 'name', required: true, maxlength: '100' });
  const required = h('input', { id: 'new-project-required', type: 'checkbox', checked: true });
  const status = h('div', { id: 'new-project-status' });
  const form = h('form', { class: 'panel stack', 'aria-labelledby': 'new-project-title' },
    h('h2', { id: 'new-project-title' }, 'New project'),
    h('label', { for: 'new-project-name' }, 'Name'), name,
    h('div', { class: 'check' }, required,
      h('label', { for: 'new-project-required' }, 'Require receipts (required mode)')),
    h('button', { type: 'submit', class: 'primary' }, 'Create project'), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const { data } = await api('POST', paths.projects(),
        { name: name.value, requireReceipt: required.checked });
      announce(`Created project ${data.project.name}.`);
      location.hash = `#/p/${encodeURIComponent(data.project.id)}`;
    } catch (error) {
      if (!ctx.fail(error)) fill(status, h('p', { class: 'error', role: 'alert' }, error.message));
    }
  });
  return form;
}
