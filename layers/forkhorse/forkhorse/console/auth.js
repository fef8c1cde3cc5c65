// Who the owner is: a bearer token kept in sessionStorage (never a cookie), from the local
// owner token or from the Cognito hosted UI (authorization code + PKCE).
import { authorizeUrl, challengeFor, randomVerifier, tokenRequest } from './pkce.js';

const TOKEN_KEY = 'forkhorse.token';
const PKCE_KEY = 'forkhorse.pkce';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function keepToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value.trim());
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(PKCE_KEY);
}

export async function loadConfig() {
  try {
    const response = await fetch('/console/config.json', { credentials: 'omit', cache: 'no-store' });
    if (response.ok) return await response.json();
  } catch {
    // Served without the API (a file preview): the local token sign-in still works.
  }
  return { auth: 'token' };
}

function redirectUri() {
  return `${location.origin}/`;
}

/** Leave for the hosted UI; the verifier and state wait in sessionStorage. */
export async function beginCognito(cognito) {
  const verifier = randomVerifier();
  const state = randomVerifier();
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const challenge = await challengeFor(verifier);
  location.assign(authorizeUrl({
    domain: cognito.domain,
    clientId: cognito.clientId,
    redirectUri: redirectUri(),
    scopes: cognito.scopes,
    state,
    challenge,
  }));
}

/** Back from the hosted UI with ?code=...&state=...: trade the code for tokens once. */
export async function completeCognito(cognito) {
  const params = new URLSearchParams(location.search);
  const code = params.get('code');
  if (!code) return false;
  const pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? 'null');
  sessionStorage.removeItem(PKCE_KEY);
  history.replaceState(null, '', `/${location.hash}`);
  if (!pending || pending.state !== params.get('state')) {
    throw new Error('The sign-in response does not match this browser session; sign in again.');
  }
  const request = tokenRequest({
    domain: cognito.domain,
    clientId: cognito.clientId,
    redirectUri: redirectUri(),
    code,
    verifier: pending.verifier,
  });
  const response = await fetch(request.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: request.body,
    credentials: 'omit',
  });
  const tokens = await response.json().catch(() => ({}));
  if (!response.ok || !tokens.access_token) {
    throw new Error(`Cognito refused the sign-in (${tokens.error ?? response.status}).`);
  }
  keepToken(tokens.access_token);
  return true;
}
