// OAuth 2.0 authorization code with PKCE (RFC 7636) for the Cognito hosted UI.

/** base64url without padding. */
export function base64url(bytes) {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** A fresh code verifier: 48 random bytes give 64 unreserved characters (43..128 allowed). */
export function randomVerifier() {
  return base64url(crypto.getRandomValues(new Uint8Array(48)));
}

/** S256: base64url(SHA-256(ASCII(verifier))). */
export async function challengeFor(verifier) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

export function authorizeUrl({ domain, clientId, redirectUri, scopes, state, challenge }) {
  const url = new URL('/oauth2/authorize', domain);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    scope: scopes.join(' '),
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  return url.toString();
}

/** The token endpoint request that trades the code and the verifier for tokens. */
export function tokenRequest({ domain, clientId, redirectUri, code, verifier }) {
  return {
    url: new URL('/oauth2/token', domain).toString(),
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: clientId,
      code,
      redirect_uri: redirectUri,
      code_verifier: verifier,
    }),
  };
}
