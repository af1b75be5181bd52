// Permission sets (`include:<nsid>`) as an app meets them: a set published as a
// com.atproto.lexicon.schema record on a second server and found through a `_lexicon` DNS TXT
// record (a loopback DNS server, dns2), a set published on this server itself, and one found
// through PDS_LEXICON_AUTHORITY_DID. Three servers share one PLC directory (@did-plc/server in
// memory). The token endpoint answers the permissions a set grants, never the include: itself.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { agentAccount, describe, PASSWORD, startTestPds, xrpc, type AgentAccount, type TestPds } from './harness.js'
import { publish, schema, startLexiconNetwork, type LexiconNetwork } from './lexicon-publishing.js'
import { consentPage, officialClient as official } from './official-client.js'
import { ath, authorize, dpopKey, exchange, loopbackClientId, openPage, par, refreshGrant, signInAndAllow } from './oauth-helpers.js'
import { describePermissionSets, PermissionSets } from '../src/oauth/permission-sets.js'

// flipped at merge once tokens are checked against granular permissions
const ENFORCES_PERMISSIONS = true

const REMOTE_SET = 'com.example.perm.basic'
const LOCAL_SET = 'com.example.home.basic'
const UNLISTED_SET = 'com.example.quiet.basic'
const SVC = 'did:web:svc.example#thing'

const permissionSet = (id: string, ns: string) =>
  schema(id, {
    type: 'permission-set',
    title: 'Example posts',
    'title:lang': { fr: 'Publications d’exemple' },
    detail: 'Write posts and likes of the example app',
    permissions: [
      { type: 'permission', resource: 'repo', collection: [`${ns}.post`, `${ns}.like`] },
      { type: 'permission', resource: 'rpc', lxm: [`${ns}.getThing`], inheritAud: true },
      // outside the set's namespace, and a kind a set may not grant: both dropped
      { type: 'permission', resource: 'repo', collection: ['app.bsky.feed.post'] },
      { type: 'permission', resource: 'blob', accept: ['image/*'] },
    ],
  })

let net: LexiconNetwork
let pds: TestPds // the authorization server the app signs in to
let publisher: TestPds // hosts the remote sets
let pinned: TestPds // PDS_LEXICON_AUTHORITY_DID

const account = (server: TestPds, prefix: string) => agentAccount(server.url, prefix)

const srv = (server: TestPds) => ({ url: server.url, publicUrl: server.env.PDS_PUBLIC_URL })

/** the raw flow: PAR, sign-in, code exchange; the token response */
async function grant(server: TestPds, handle: string, scope: string) {
  const key = await dpopKey()
  const clientId = loopbackClientId(scope)
  const { code, verifier } = await authorize(srv(server), key, { handle, password: PASSWORD }, { client_id: clientId, scope })
  const token = await exchange(srv(server), key, code, verifier, { client_id: clientId })
  expect(token.status, token.text).toBe(200)
  return { key, clientId, token: token.json }
}

async function parStatus(server: TestPds, scope: string) {
  const res = await par(srv(server), await dpopKey(), { client_id: loopbackClientId(scope), scope })
  return [res.status, res.json?.error, res.json?.error_description]
}

const officialClient = (scope: string) => official(pds.url, net.plcUrl, scope)

let pub: AgentAccount
let user: AgentAccount

describe('permission sets', () => {
  beforeAll(async () => {
    net = await startLexiconNetwork()
    pds = await startTestPds(net.env)
    publisher = await startTestPds({ ...net.env, PDS_HOSTNAME: 'pds2.localhost' })
    pub = await account(publisher, 'pub')
    await publish(pub.agent, permissionSet(REMOTE_SET, 'com.example.perm'))
    await publish(pub.agent, permissionSet(UNLISTED_SET, 'com.example.quiet'))
    net.txt['_lexicon.perm.example.com'] = [`did=${pub.did}`]
    pinned = await startTestPds({ ...net.env, PDS_HOSTNAME: 'pds3.localhost', PDS_LEXICON_AUTHORITY_DID: pub.did })
    user = await account(pds, 'user')
  })
  afterAll(async () => {
    await pds?.stop()
    await publisher?.stop()
    await pinned?.stop()
    await net?.stop()
  })

  it('serves lexicon documents as records and refuses a record that is not one', async () => {
    const { agent, did } = pub
    const got = await xrpc(publisher.url, 'com.atproto.repo.getRecord', {
      params: { repo: did, collection: 'com.atproto.lexicon.schema', rkey: REMOTE_SET },
    })
    expect(got.status).toBe(200)
    expect(got.body.value.defs.main.type).toBe('permission-set')

    const refused = async (p: Promise<unknown>) => {
      try {
        await p
        return 'ok'
      } catch (err: any) {
        return [err.status, err.error, err.message]
      }
    }
    const collection = 'com.atproto.lexicon.schema'
    // no defs, a main definition of an unknown type, a record key that is not the document's id
    const noDefs = { $type: collection, lexicon: 1, id: 'com.example.perm.nodefs' }
    expect(await refused(agent.com.atproto.repo.createRecord({ repo: did, collection, rkey: noDefs.id, record: noDefs }))).toEqual([
      400,
      'InvalidRequest',
      expect.stringMatching(/^Invalid com\.atproto\.lexicon\.schema record: not a valid lexicon document \(defs/),
    ])
    const badType = schema('com.example.perm.bad', { type: 'permission-set', permissions: [{ type: 'scope' }] })
    expect(await refused(agent.com.atproto.repo.putRecord({ repo: did, collection, rkey: badType.id, record: badType }))).toEqual([
      400,
      'InvalidRequest',
      expect.stringContaining('not a valid lexicon document'),
    ])
    const elsewhere = permissionSet('com.example.perm.other', 'com.example.perm')
    expect(
      await refused(
        agent.com.atproto.repo.applyWrites({
          repo: did,
          writes: [{ $type: 'com.atproto.repo.applyWrites#create', collection, rkey: 'com.example.perm.wrong', value: elsewhere }],
        }),
      ),
    ).toEqual([400, 'InvalidRequest', expect.stringContaining("the record key must be the document's id (com.example.perm.other)")])
    // nothing of the refused writes is there
    const list = await xrpc(publisher.url, 'com.atproto.repo.listRecords', { params: { repo: did, collection } })
    expect(list.body.records.map((r: any) => r.value.id).sort()).toEqual([REMOTE_SET, UNLISTED_SET])
  })

  it('expands a set found through DNS on another server into the token scope, and a refresh keeps it', async () => {
    const scope = `atproto include:${REMOTE_SET}?aud=${encodeURIComponent(SVC)}`
    const { key, clientId, token } = await grant(pds, user.handle, scope)
    const granted = token.scope.split(' ')
    // several collections in one permission read as one repo: scope with a collection each
    expect(granted).toEqual([
      'atproto',
      'repo?collection=com.example.perm.like&collection=com.example.perm.post',
      // the include:'s aud, '#' escaped as the library writes it
      'rpc:com.example.perm.getThing?aud=did:web:svc.example%23thing',
    ])
    expect(token.scope).not.toContain('include:')
    // outside the set's namespace, and blob permissions: not granted
    expect(token.scope).not.toContain('app.bsky.feed.post')
    expect(token.scope).not.toContain('blob:')

    const refreshed = await refreshGrant(srv(pds), key, token.refresh_token, { client_id: clientId })
    expect(refreshed.status, refreshed.text).toBe(200)
    expect(refreshed.json.scope).toBe(token.scope)
  })

  it('resolves a set published on this server from its own store', async () => {
    const home = await account(pds, 'home')
    await publish(home.agent, permissionSet(LOCAL_SET, 'com.example.home'))
    net.txt['_lexicon.home.example.com'] = [`did=${home.did}`]
    const { token } = await grant(pds, user.handle, `atproto include:${LOCAL_SET}`)
    // without an aud on the include:, the rpc permission that inherits one is left out
    expect(token.scope.split(' ')).toEqual(['atproto', 'repo?collection=com.example.home.like&collection=com.example.home.post'])
  })

  it('with PDS_LEXICON_AUTHORITY_DID, resolves every NSID from that DID and not through DNS', async () => {
    const scope = `atproto include:${UNLISTED_SET}`
    // no _lexicon record names a publisher of the set
    expect(await parStatus(pds, scope)).toEqual([400, 'invalid_scope', expect.stringContaining(UNLISTED_SET)])
    const pinnedUser = await account(pinned, 'pinned')
    const { token } = await grant(pinned, pinnedUser.handle, scope)
    expect(token.scope).toBe('atproto repo?collection=com.example.quiet.like&collection=com.example.quiet.post')
  })

  it('refuses at PAR a set that does not resolve or is not a permission set', async () => {
    expect(await parStatus(pds, 'atproto include:com.example.nowhere.set')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('com.example.nowhere.set could not be resolved'),
    ])
    // the authority publishes no such record
    expect(await parStatus(pds, 'atproto include:com.example.perm.missing')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('could not be fetched (status 404)'),
    ])
    await publish(pub.agent, schema('com.example.perm.getThing', { type: 'query', output: { encoding: 'application/json' } }))
    expect(await parStatus(pds, 'atproto include:com.example.perm.getThing')).toEqual([
      400,
      'invalid_scope',
      'com.example.perm.getThing is not a permission set',
    ])
    expect(await parStatus(pds, 'atproto include:not-an-nsid')).toEqual([
      400,
      'invalid_scope',
      expect.stringContaining('include:not-an-nsid'),
    ])
  })

  it('the official client is refused with invalid_scope at PAR for an unresolvable set and signs in with a resolvable one', async () => {
    const bad = officialClient('atproto include:com.example.gone.set')
    const err = await bad.authorize(user.handle, { scope: 'atproto include:com.example.gone.set' }).then(
      () => undefined,
      (e: any) => e,
    )
    expect(err?.error).toBe('invalid_scope')

    const scope = `atproto include:${REMOTE_SET}`
    const client = officialClient(scope)
    const consent = await consentPage(client, pds.url, user.handle, scope)
    // the consent page names the set by its title and detail, not by its NSID alone
    expect(consent.text).toContain('Example posts')
    expect(consent.text).toContain('Write posts and likes of the example app')
    const { session } = await consent.allow()
    const info = await session.getTokenInfo(false)
    expect(info.scope).toBe('atproto repo?collection=com.example.perm.like&collection=com.example.perm.post')
    // the grant is usable: the session reads the account
    const me = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(me.status).toBe(200)
    expect(((await me.json()) as any).did).toBe(user.did)
  })

  it('prompt=none gives a code to an app already granted its include: scope', async () => {
    const scope = `atproto include:${REMOTE_SET}`
    const client = officialClient(scope)
    const first = (await client.authorize(user.handle, { scope })).searchParams.get('request_uri')!
    const page = await openPage(pds.url, first)
    const allowed = await signInAndAllow(pds.url, first, { handle: user.handle, password: PASSWORD }, page, { remember: 'on' })
    expect(allowed.status).toBe(302)
    await client.callback(new URL(allowed.headers.get('location')!).searchParams)

    // the app comes back silently on the same browser: no page, a code
    const again = (await client.authorize(user.handle, { scope, prompt: 'none' })).searchParams.get('request_uri')!
    const res = await fetch(`${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(again)}`, {
      headers: { cookie: page.cookie },
      redirect: 'manual',
    })
    expect(res.status).toBe(302)
    const back = new URL(res.headers.get('location')!).searchParams
    expect(back.get('error')).toBeNull()
    const { session } = await client.callback(back)
    expect((await session.getTokenInfo(false)).scope).toBe('atproto repo?collection=com.example.perm.like&collection=com.example.perm.post')
  })

  it('remembers a resolved set: a record deleted after the app asked changes nothing for an hour', async () => {
    const id = 'com.example.perm.brief'
    await publish(pub.agent, permissionSet(id, 'com.example.perm'))
    const scope = `atproto include:${id}`
    expect((await parStatus(pds, scope))[0]).toBe(201)
    await pub.agent.com.atproto.repo.deleteRecord({ repo: pub.did, collection: 'com.atproto.lexicon.schema', rkey: id })
    const { token } = await grant(pds, user.handle, scope)
    expect(token.scope).toBe('atproto repo?collection=com.example.perm.like&collection=com.example.perm.post')
  })

  it('describes each included set for the consent page, in the reader’s language when the set has it', async () => {
    const sets = new PermissionSets(pds.services)
    const scope = `atproto transition:generic include:${REMOTE_SET}?aud=${encodeURIComponent(SVC)}`
    const permissions = [
      'repo?collection=com.example.perm.like&collection=com.example.perm.post',
      'rpc:com.example.perm.getThing?aud=did:web:svc.example%23thing',
    ]
    expect(await describePermissionSets(scope, sets, 'fr-CA, en;q=0.5')).toEqual([
      { nsid: REMOTE_SET, title: 'Publications d’exemple', detail: 'Write posts and likes of the example app', permissions },
    ])
    const [english] = await describePermissionSets(scope, sets, 'de;q=0.9, en')
    expect(english.title).toBe('Example posts')
    expect(await describePermissionSets('atproto transition:generic', sets)).toEqual([])
  })

  it('outside development mode, a set on a private address is not fetched', async () => {
    const prod = await startTestPds({ ...net.env, PDS_DEV_MODE: 'false', PDS_CRAWLERS: '' })
    try {
      expect(await parStatus(prod, `atproto include:${REMOTE_SET}`)).toEqual([
        400,
        'invalid_scope',
        expect.stringContaining('could not be fetched'),
      ])
    } finally {
      await prod.stop()
    }
  })

  // Needs tokens checked against granular permissions (the permission model replacing
  // atproto/transition:generic); until then it is skipped.
  ;(ENFORCES_PERMISSIONS ? describe : describe.skip)('permission sets, enforced', () => {
    it('a token from a set writes the set’s collections and nothing else', async () => {
      const { token, key } = await grant(pds, user.handle, `atproto include:${REMOTE_SET}`)
      const call = async (collection: string) => {
        const url = `${pds.url}/xrpc/com.atproto.repo.createRecord`
        const res = await fetch(url, {
          method: 'POST',
          headers: {
            authorization: `DPoP ${token.access_token}`,
            dpop: await key.proof('POST', `${pds.env.PDS_PUBLIC_URL}/xrpc/com.atproto.repo.createRecord`, { ath: ath(token.access_token) }),
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            repo: user.did,
            collection,
            record: { $type: collection, text: 'x', createdAt: new Date().toISOString() },
          }),
        })
        return [res.status, ((await res.json()) as any).error]
      }
      expect((await call('com.example.perm.post'))[0]).toBe(200)
      expect(await call('app.bsky.feed.post')).toEqual([403, 'InsufficientScope'])
    })
  })
})
