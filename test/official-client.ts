// The official @atproto/oauth-client-node as a native app sets it up against a test server: a
// loopback client id asking for the app's scope, sessions and states kept in memory, handles
// resolved by the server and DIDs by the test's PLC directory; and the sign-in a user goes through
// with it (PAR inside `authorize`, the password form, the consent page, the callback).
import { requestLocalLock } from '@atproto/oauth-client'
import { NodeOAuthClient, type NodeSavedSession, type NodeSavedState, type OAuthSession } from '@atproto/oauth-client-node'
import { expect } from 'vitest'
import { PASSWORD } from './harness.js'
import { loopbackClientId, openPage, post, REDIRECT, signInAndAllow, submitPage } from './oauth-helpers.js'

function memoryStore<T>() {
  const m = new Map<string, T>()
  return {
    get: async (k: string) => m.get(k),
    set: async (k: string, v: T) => void m.set(k, v),
    del: async (k: string) => void m.delete(k),
  }
}

/** the official client of an app asking for `scope`, signing in to the server at `pdsUrl` */
export function officialClient(pdsUrl: string, plcUrl: string, scope: string) {
  return new NodeOAuthClient({
    clientMetadata: {
      client_id: loopbackClientId(scope),
      redirect_uris: [REDIRECT],
      scope,
      response_types: ['code'],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      dpop_bound_access_tokens: true,
    },
    stateStore: memoryStore<NodeSavedState>(),
    sessionStore: memoryStore<NodeSavedSession>(),
    handleResolver: pdsUrl,
    plcDirectoryUrl: plcUrl,
    allowHttp: true,
    requestLock: requestLocalLock,
  })
}

/** `handle` (with PASSWORD) signs in and allows everything `scope` asks: the app's session */
export async function signInOfficial(client: NodeOAuthClient, pdsUrl: string, handle: string, scope: string): Promise<OAuthSession> {
  const requestUri = (await client.authorize(handle, { scope })).searchParams.get('request_uri')!
  const page = await openPage(pdsUrl, requestUri)
  expect(page.status, page.html).toBe(200)
  const res = await signInAndAllow(pdsUrl, requestUri, { handle, password: PASSWORD }, page)
  expect(res.status, res.text).toBe(302)
  return (await client.callback(new URL(res.headers.get('location')!).searchParams)).session
}

/**
 * the consent page `handle` sees once signed in (with PASSWORD) from a browser asking for `lang`
 * (none: no Accept-Language), and how to allow it
 */
export async function consentPage(client: NodeOAuthClient, pdsUrl: string, handle: string, scope: string, lang?: string) {
  const requestUri = (await client.authorize(handle, { scope })).searchParams.get('request_uri')!
  const page = await openPage(pdsUrl, requestUri)
  const shown = await post(
    `${pdsUrl}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`,
    { handle, password: PASSWORD, step: 'login', action: 'allow', csrf_token: page.csrf },
    { cookie: page.cookie, ...(lang === undefined ? {} : { 'accept-language': lang }) },
  )
  expect(shown.status, shown.text).toBe(200)
  const allow = async () => {
    const did = /name="did" value="([^"]+)"/.exec(shown.text)![1]
    const res = await submitPage(pdsUrl, requestUri, { step: 'consent', did, action: 'allow', csrf_token: page.csrf }, page.cookie)
    expect(res.status, res.text).toBe(302)
    return client.callback(new URL(res.headers.get('location')!).searchParams)
  }
  return { text: shown.text, allow }
}
