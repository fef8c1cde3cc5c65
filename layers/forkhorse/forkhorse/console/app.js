// The console's shell: sign-in, hash routes, and one page at a time.
import { h, fill } from './dom.js';
import { beginCognito, completeCognito, keepToken, loadConfig, signOut, token } from './auth.js';
import { get, paths, SignedOut } from './api.js';
import { projectsPage } from './projects.js';
import { projectPage } from './project.js';
import { reviewPage } from './review.js';

const main = document.getElementById('main');
const signOutButton = document.getElementById('sign-out');
let config = { auth: 'token' };
let stopPage = () => {};
let signInNotice = '';

function route(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 2 && parts[0] === 'p') return [projectPage, parts[1]];
  if (parts.length === 4 && parts[0] === 'p' && parts[2] === 'r') {
    return [reviewPage, parts[1], parts[3]];
  }
  return [projectsPage];
}

/** What every page gets: where to draw, how to title itself, and how to fail. */
function pageContext() {
  return {
    main,
    title(text) {
      document.title = `${text} · Forkhorse`;
    },
    ready() {
      if (!performance.getEntriesByName('forkhorse:ready').length) {
        performance.mark('forkhorse:ready');
      }
      document.body.dataset.ready = 'true';
      // Screen readers start at the new page's heading.
      if (!main.contains(document.activeElement) || document.activeElement === main) {
        main.querySelector('h1')?.focus({ preventScroll: true });
      }
    },
    fail(error) {
      if (error instanceof SignedOut) {
        signInNotice = error.message;
        render();
        return true;
      }
      return false;
    },
  };
}

function render() {
  stopPage();
  stopPage = () => {};
  document.body.dataset.ready = 'false';
  if (!token()) {
    signOutButton.hidden = true;
    showSignIn();
    return;
  }
  signOutButton.hidden = false;
  const [page, ...args] = route(location.hash);
  stopPage = page(pageContext(), ...args) ?? (() => {});
}

function showSignIn() {
  document.title = 'Sign in · Forkhorse';
  const notice = signInNotice ? h('p', { class: 'error', role: 'alert' }, signInNotice) : null;
  const form = config.auth === 'cognito' ? cognitoForm() : tokenForm();
  fill(main, h('section', { class: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'), notice, form));
  document.body.dataset.ready = 'true';
}

function tokenForm() {
  const input = h('input', {
    id: 'owner-token', name: 'token', type: 'password', autocomplete: 'off',
    spellcheck: 'false', required: true, 'aria-describedby': 'token-help',
  });
  const form = h('form', { class: 'stack' },
    h('p', { id: 'token-help' }, 'Paste the owner token. ', h('code', null, 'forkhorse serve'),
      ' writes it to ', h('code', null, '<home>/owner-token'),
      '. It stays in this tab only (sessionStorage) and is sent as a bearer header.'),
    h('label', { for: 'owner-token' }, 'Owner token'), input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    keepToken(input.value);
    signInNotice = '';
    try {
      await get(paths.projects());
    } catch (error) {
      signInNotice = error instanceof SignedOut ? error.message : `Sign-in failed: ${error.message}`;
      signOut();
    }
    render();
  });
  return form;
}

function cognitoForm() {
  const button = h('button', { type: 'button', class: 'primary', id: 'cognito-sign-in' },
    'Sign in with the hosted UI');
  button.addEventListener('click', () => beginCognito(config.cognito));
  return h('div', { class: 'stack' },
    h('p', null, 'Owners sign in through Amazon Cognito (authorization code with PKCE).'),
    button);
}

async function start() {
  config = await loadConfig();
  if (config.auth === 'cognito') {
    try {
      await completeCognito(config.cognito);
    } catch (error) {
      signInNotice = error.message;
    }
  }
  signOutButton.addEventListener('click', () => {
    signOut();
    signInNotice = 'Signed out.';
    render();
  });
  document.querySelector('.skip').addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
  window.addEventListener('hashchange', render);
  render();
}

start();
