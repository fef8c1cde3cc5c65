// The Forkhorse API over fetch: the bearer header, JSON bodies, and errors as values.
import { signOut, token } from './auth.js';

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error ?? `The server answered ${status}.`);
    this.status = status;
    this.reasons = Array.isArray(body?.reasons) ? body.reasons : [];
  }
}

export class SignedOut extends Error {}

/** One call; resolves to {status, data} for 2xx, throws ApiError otherwise. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json', Authorization: `Bearer ${token() ?? ''}` };
  const init = { method, headers, credentials: 'omit', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => null);
  if (response.status === 401) {
    signOut();
    throw new SignedOut(data?.error ?? 'Sign in again.');
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return { status: response.status, data };
}

export const get = async (path) => (await api('GET', path)).data;

const enc = encodeURIComponent;
const paged = (path, cursor) => path + (cursor ? `?cursor=${enc(cursor)}` : '');

export const paths = {
  projects: () => '/projects',
  state: (project) => `/projects/${enc(project)}/state`,
  settings: (project) => `/projects/${enc(project)}/settings`,
  policy: (project) => `/projects/${enc(project)}/policy`,
  review: (project, review) => `/projects/${enc(project)}/reviews/${enc(review)}`,
  reviews: (project, cursor) => paged(`/projects/${enc(project)}/reviews`, cursor),
  ledger: (project, cursor) => paged(`/projects/${enc(project)}/ledger`, cursor),
  log: () => '/log',
  logKey: () => '/log/key',
  logCheckpoint: () => '/log/checkpoint',
  logEntry: (index) => `/log/entry/${Number(index)}`,
};
