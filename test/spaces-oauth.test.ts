// The `space:` OAuth permission at the authorization server, as an app meets it: the official
// client asks for one, the consent page words it (the type's declared name, a named authority's
// handle, a warning for every space of anyone), and the token endpoint answers it rewritten for
// the user (`self` as the DID, the declared collections), at the code exchange and every refresh.
// Space type declarations and permission sets are published as lexicon records on the server and
// found through a `_lexicon` TXT record on a loopback nameserver; DIDs live in a PLC stand-in.
import type { NodeOAuthClient } from '@atproto/oauth-client-node'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { agentAccount, bearer, describe, PASSWORD, startTestPds, xrpc, type AgentAccount, type TestPds } from './harness.js'
import { publish, schema, startLexiconNetwork, type LexiconNetwork } from './lexicon-publishing.js'
import { consentPage, officialClient as official } from './official-client.js'
import { csrfOf, pageClient } from './page-client.js'
import { authorize, dpopKey, exchange, loopbackClientId, par, refreshGrant } from './oauth-helpers.js'
import { scopeStringAllows } from '../src/space/scope.js'

const CHAT = 'com.example.chat.space'
const SET = 'com.example.chat.access'
const MESSAGE = 'com.example.chat.message'
const REACTION = 'com.example.chat.reaction'

let net: LexiconNetwork
let pds: TestPds

const account = (prefix: string) => agentAccount(pds.url, prefix)
const srv = () => ({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL })

async function parStatus(scope: string) {
  const res = await par(srv(), await dpopKey(), { client_id: loopbackClientId(scope), scope })
  return [res.status, res.json?.error, res.json?.error_description]
}

const officialClient = (scope: string) => official(pds.url, net.plcUrl, scope)

/** the consent page the official client's request leads to, once signed in (by a browser asking for `lang`); and how to allow it */
const consent = (client: NodeOAuthClient, who: { handle: string }, scope: string, lang?: string) =>
  consentPage(client, pds.url, who.handle, scope, lang)

/** the visible permission lines of a consent page */
const permissionLines = (html: string) => [...html.matchAll(/<li>([^<]+)<\/li>/g)].map((m) => m[1].replace(/&#x27;|&#39;/g, "'"))

let pub: AgentAccount
let user: AgentAccount
let friend: AgentAccount

describe('space: scopes at the authorization server', () => {
  beforeAll(async () => {
    net = await startLexiconNetwork()
    pds = await startTestPds(net.env)
    pub = await account('pub')
    user = await account('user')
    friend = await account('friend')
    net.txt['_lexicon.chat.example.com'] = [`did=${pub.did}`]
    await publish(
      pub.agent,
      schema(CHAT, {
        type: 'space',
        key: 'any',
        name: 'Group chat',
        'name:lang': { fr: 'Discussion de groupe', 'pt-BR': 'Bate-papo em grupo' },
        collections: [MESSAGE, REACTION],
      }),
    )
    await publish(
      pub.agent,
      schema(SET, {
        type: 'permission-set',
        title: 'Chat access',
        'title:lang': { fr: 'Accès aux discussions' },
        detail: 'Read and post in your group chats',
        permissions: [
          { type: 'permission', resource: 'space', spaceType: CHAT, action: ['read', 'create'], collection: [MESSAGE] },
          // a space type outside the set's namespace: dropped
          { type: 'permission', resource: 'space', spaceType: 'org.other.team.space', action: ['read'] },
        ],
      }),
    )
    await publish(pub.agent, schema('com.example.chat.getThing', { type: 'query', output: { encoding: 'application/json' } }))
  })
  afterAll(async () => {
    await pds?.stop()
    await net?.stop()
  })

  it('the official client gets a space: scope; the consent page names the type; the token carries it rewritten, also after a refresh', async () => {
    const scope = `atproto space:${CHAT}`
    const client = officialClient(scope)
    const page = await consent(client, user, scope)
    expect(permissionLines(page.text)).toContain(
      'In “Group chat” spaces you own: read everything members wrote and create, change and delete your records of the kinds the space type defines.',
    )
    expect(page.text).not.toContain('role="alert" data-kind="warning"')
    const { session } = await page.allow()
    const rewritten = `atproto space:${CHAT}?authority=${user.did}&collection=${MESSAGE}&collection=${REACTION}`
    expect((await session.getTokenInfo(false)).scope).toBe(rewritten)
    // a refresh answers the rewritten form again, never `self`
    const refreshed = await session.getTokenInfo(true)
    expect(refreshed.scope).toBe(rewritten)
    const me = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(me.status).toBe(200)
  })

  it('a raw refresh rewrites again and may narrow to the rewritten value', async () => {
    const scope = `atproto space:${CHAT}?action=read_self`
    const key = await dpopKey()
    const clientId = loopbackClientId(scope)
    const { code, verifier } = await authorize(srv(), key, { handle: user.handle, password: PASSWORD }, { client_id: clientId, scope })
    const token = await exchange(srv(), key, code, verifier, { client_id: clientId })
    expect(token.status, token.text).toBe(200)
    const space = `space:${CHAT}?authority=${user.did}&collection=${MESSAGE}&collection=${REACTION}&action=read_self`
    expect(token.json.scope).toBe(`atproto ${space}`)
    const again = await refreshGrant(srv(), key, token.json.refresh_token, { client_id: clientId })
    expect(again.status, again.text).toBe(200)
    expect(again.json.scope).toBe(`atproto ${space}`)
    // the app names what its token carried; it still gets exactly that
    const narrowed = await refreshGrant(srv(), key, again.json.refresh_token, { client_id: clientId, scope: `atproto ${space}` })
    expect(narrowed.status, narrowed.text).toBe(200)
    expect(narrowed.json.scope).toBe(`atproto ${space}`)
    const wider = await refreshGrant(srv(), key, narrowed.json.refresh_token, {
      client_id: clientId,
      scope: `atproto space:${CHAT}?authority=*&action=read`,
    })
    expect([wider.status, wider.json.error]).toEqual([400, 'invalid_scope'])
  })

  it('shows a named authority by its verified handle and keeps its DID in the token', async () => {
    const scope = `atproto space:${CHAT}?authority=${friend.did}&skey=family&action=read`
    const client = officialClient(scope)
    const page = await consent(client, user, scope)
    expect(permissionLines(page.text)).toContain(
      `In the space “family” (“Group chat”) @${friend.handle} owns: read everything members wrote.`,
    )
    const { session } = await page.allow()
    expect((await session.getTokenInfo(false)).scope).toBe(
      `atproto space:${CHAT}?authority=${friend.did}&skey=family&collection=${MESSAGE}&collection=${REACTION}&action=read`,
    )
  })

  it('warns prominently about every kind of space of anyone, and grants it as asked', async () => {
    const scope = 'atproto space:*?authority=*&action=read'
    const client = officialClient(scope)
    const page = await consent(client, user, scope)
    expect(page.text).toMatch(/<p class="alert" role="alert" data-kind="warning">Careful: this app asks for every kind of space/)
    expect(permissionLines(page.text)).toContain('In any space anyone owns: read everything members wrote.')
    const { session } = await page.allow()
    expect((await session.getTokenInfo(false)).scope).toBe('atproto space:*?authority=*&action=read')
  })

  it('a permission set grants its space permissions under its own namespace, worded on the consent page', async () => {
    const scope = `atproto include:${SET}`
    const client = officialClient(scope)
    const page = await consent(client, user, scope)
    expect(page.text).toContain('Chat access')
    expect(permissionLines(page.text)).toContain(
      `In “Group chat” spaces you own: read everything members wrote and create your “${MESSAGE}” records.`,
    )
    expect(page.text).not.toContain('org.other.team.space')
    const { session } = await page.allow()
    expect((await session.getTokenInfo(false)).scope).toBe(
      `atproto space:${CHAT}?authority=${user.did}&collection=${MESSAGE}&action=read&action=create`,
    )
  })

  it('names the space type and the permission set in the language the browser asks for, where they declare it', async () => {
    const scope = `atproto space:${CHAT}?action=read include:${SET}`
    const client = officialClient(scope)
    const said = (text: string) => permissionLines(text).filter((l) => l.startsWith('In '))
    const french = await consent(client, user, scope, 'fr-CA, en;q=0.5')
    expect(french.text).toContain('Accès aux discussions')
    // the set's line and the app's own
    expect(said(french.text).sort()).toEqual([
      `In “Discussion de groupe” spaces you own: read everything members wrote and create your “${MESSAGE}” records.`,
      'In “Discussion de groupe” spaces you own: read everything members wrote.',
    ])
    // a primary language matches a declared regional one; the set has no Portuguese title
    const portuguese = await consent(client, user, scope, 'de, pt;q=0.8')
    expect(said(portuguese.text)).toContain('In “Bate-papo em grupo” spaces you own: read everything members wrote.')
    expect(portuguese.text).toContain('Chat access')
    // none declared: the default name
    const german = await consent(client, user, scope, 'de-DE')
    expect(said(german.text)).toContain('In “Group chat” spaces you own: read everything members wrote.')
    expect(german.text).toContain('Chat access')
    expect(german.text).not.toContain('Accès aux discussions')
  })

  it('refuses at PAR a space type whose declaration cannot be had, and a malformed space: scope', async () => {
    expect(await parStatus('atproto space:com.example.chat.nothere')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('Space type com.example.chat.nothere could not be resolved'),
    ])
    expect(await parStatus('atproto space:com.example.chat.getThing')).toEqual([
      400,
      'invalid_scope',
      'com.example.chat.getThing is not a space type declaration',
    ])
    expect(await parStatus('atproto space:com.nowhere.thing.space')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('could not be resolved'),
    ])
    expect(await parStatus('atproto space:*?authority=someone')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('authority must be a DID'),
    ])
    expect(await parStatus(`atproto space:${CHAT}?action=write`)).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('unknown action write'),
    ])
    // any type needs no declaration; neither does a concrete one that names its collections at PAR, which still must resolve
    expect((await parStatus('atproto space:*'))[0]).toBe(201)

    const bad = officialClient('atproto space:com.example.chat.nothere')
    const err = await bad.authorize(user.handle, { scope: 'atproto space:com.example.chat.nothere' }).then(
      () => undefined,
      (e: any) => e,
    )
    expect(err?.error).toBe('invalid_scope')
  })

  it('refuses a space type declaration that is not well formed when it is published', async () => {
    const refused = await pub.agent.com.atproto.repo
      .createRecord({
        repo: pub.did,
        collection: 'com.atproto.lexicon.schema',
        rkey: 'com.example.chat.broken',
        record: schema('com.example.chat.broken', { type: 'space', key: 'any', name: '', collections: ['not an nsid'] }),
      })
      .then(
        () => undefined,
        (e: any) => [e.status, e.error, e.message],
      )
    expect(refused).toEqual([400, 'InvalidRequest', expect.stringContaining('not a valid space type declaration')])
  })

  it('a token writes in a space what its rewritten scope allows; transition:generic grants nothing in spaces', async () => {
    const req = { space: { authority: user.did, type: CHAT, skey: 'family' }, user: user.did, action: 'read' as const }
    expect(scopeStringAllows('atproto transition:generic', req)).toBe(false)
    expect(scopeStringAllows(`atproto space:${CHAT}?authority=${user.did}&collection=${MESSAGE}`, req)).toBe(true)

    const write = async (scope: string, space: string, collection: string) => {
      const client = officialClient(scope)
      const { session } = await (await consent(client, user, scope)).allow()
      const res = await session.fetchHandler('/xrpc/com.atproto.space.createRecord', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ space, repo: user.did, collection, record: { $type: collection, text: 'hello' } }),
      })
      return [res.status, ((await res.json()) as any).error]
    }
    const own = `at://${user.did}/space/${CHAT}/family`
    // `self` and the declared collections, as the token carries them
    expect((await write(`atproto space:${CHAT}?action=create`, own, MESSAGE))[0]).toBe(200)
    expect(await write(`atproto space:${CHAT}?action=create`, own, 'com.example.chat.other')).toEqual([403, 'InsufficientScope'])
    // `self` is the user: a friend's space is not theirs
    expect(await write(`atproto space:${CHAT}?action=create`, `at://${friend.did}/space/${CHAT}/family`, MESSAGE)).toEqual([
      403,
      'InsufficientScope',
    ])
    expect(await write('atproto transition:generic', own, MESSAGE)).toEqual([403, 'InsufficientScope'])
  })
  it('the account page lists the spaces a person owns and those they belong to or wrote in', async () => {
    const session = async (a: { handle: string }) => {
      const res = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: a.handle, password: PASSWORD } })
      return bearer(res.body.accessJwt)
    }
    const create = async (a: { handle: string }, skey: string) => {
      const res = await xrpc(pds.url, 'com.atproto.simplespace.createSpace', {
        headers: await session(a),
        body: {
          type: CHAT,
          skey,
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
      })
      expect(res.status, res.text).toBe(200)
      return res.body.uri as string
    }
    const mine = await create(user, 'book-club')
    const friends = await create(friend, 'family')
    const added = await xrpc(pds.url, 'com.atproto.simplespace.addMember', {
      headers: await session(friend),
      body: { space: friends, did: user.did },
    })
    expect(added.status, added.text).toBe(200)
    const other = await create(pub, 'news')
    const wrote = await xrpc(pds.url, 'com.atproto.space.createRecord', {
      headers: await session(user),
      body: { space: other, repo: user.did, collection: MESSAGE, record: { $type: MESSAGE, text: 'hello' } },
    })
    expect(wrote.status, wrote.text).toBe(200)

    const http = pageClient(pds.url)
    const login = await http.get('/account?view=login')
    const signedIn = await http.post('/account/sign-in', { csrf_token: csrfOf(login.text), handle: user.handle, password: PASSWORD })
    expect(signedIn.status).toBe(303)
    const page = (await http.get('/account')).text
    const owned = /id="spaces-owned">([\s\S]*?)<\/ul>/.exec(page)?.[1] ?? ''
    expect(owned).toContain(`data-space="${mine}"`)
    expect(owned).toContain('book-club')
    expect(owned).not.toContain(friends)
    const joined = /id="spaces-joined">([\s\S]*?)<\/ul>/.exec(page)?.[1] ?? ''
    expect(joined).toContain(`data-space="${friends}"`)
    expect(joined).toContain(`owned by @${friend.handle}`)
    expect(joined).toMatch(/family[\s\S]*member/)
    expect(joined).toContain(`data-space="${other}"`)
    expect(joined).toMatch(/news[\s\S]*you wrote here/)

    // a deleted space is no longer listed as owned
    const gone = await xrpc(pds.url, 'com.atproto.simplespace.deleteSpace', { headers: await session(user), body: { space: mine } })
    expect(gone.status, gone.text).toBe(200)
    expect((await http.get('/account')).text).not.toContain(`data-space="${mine}"`)
  })
})
