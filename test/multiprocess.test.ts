// Two server processes (`node dist/bin.js`) on one PostgreSQL schema and one Redis, as an
// operator runs them behind a load balancer: every race settles once across both, the firehose of
// one process carries the other's writes in order without a gap, a takedown or a password change
// through one is enforced by the other, cutting their database connections mid-burst loses no
// acknowledged write and needs no restart, and a space written through both stays one verifiable
// log whose syncer hears each rev at most once and whose proofs are single use across both.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { decode as cborDecode } from '@atproto/lex-cbor'
import { readCar, verifyRepoCar } from '@atproto/repo'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import {
  ADMIN_PASSWORD,
  bearer,
  describe,
  dialect,
  dropSchema,
  freePort,
  postgresUrl,
  redisUrl,
  tempDir,
  testEnv,
  xrpc,
} from './harness.js'
import { commitFromJson, verifyCommit } from '../src/space/commit.js'
import { verifySpaceCar } from '../src/space/car.js'
import { LtHash } from '../src/space/lthash.js'
import { subscribe, type Frame } from './firehose-client.js'
import { ath, authorize, dpopGet, dpopKey, exchange, par, type DpopKey } from './oauth-helpers.js'
import { newKey, proof, startStandIn } from './space-stand-in.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const d = dialect === 'postgres' && postgresUrl && redisUrl ? describe : describe.skip

type Proc = { url: string; child: ChildProcess; stderr: string[]; exited: Promise<void> }

function run(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [BIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
  const stderr: string[] = []
  child.stderr.on('data', (b: Buffer) => stderr.push(b.toString()))
  return {
    url: `http://127.0.0.1:${env.PDS_PORT}`,
    child,
    stderr,
    exited: new Promise<void>((resolve) => child.on('exit', () => resolve())),
  }
}

async function waitHealthy(url: string) {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} did not become healthy within 10 s`)
}

const basic = { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

d('several processes on one PostgreSQL and Redis', () => {
  let a: Proc
  let b: Proc
  let envA: Record<string, string>
  let publicUrl: string
  const dir = tempDir()
  // every connection of these two processes carries this name, so the fault test cuts only them
  const appName = `pds_mp_${randomBytes(4).toString('hex')}`

  beforeAll(async () => {
    const [portA, portB] = [await freePort(), await freePort()]
    publicUrl = `http://localhost:${portA}`
    const dbUrl = postgresUrl! + (postgresUrl!.includes('?') ? '&' : '?') + `application_name=${appName}`
    const shared = {
      PDS_DB_POSTGRES_URL: dbUrl,
      PDS_REDIS_URL: redisUrl!,
      PDS_DPOP_REPLAY_STORE: 'redis',
      PDS_PUBLIC_URL: publicUrl,
    }
    envA = await testEnv(portA, dir, shared)
    const envB = await testEnv(portB, dir, { ...shared, PDS_DB_POSTGRES_SCHEMA: envA.PDS_DB_POSTGRES_SCHEMA })
    a = run(envA)
    await waitHealthy(a.url)
    b = run(envB)
    await waitHealthy(b.url)
  })

  afterAll(async () => {
    for (const p of [a, b]) {
      if (p && p.child.exitCode === null) {
        p.child.kill('SIGTERM')
        await p.exited
      }
    }
    if (envA) await dropSchema(envA)
    rmSync(dir, { recursive: true, force: true })
  })

  let n = 0
  async function account(via: Proc) {
    const handle = `mp${++n}-${randomBytes(3).toString('hex')}.test`
    const res = await xrpc(via.url, 'com.atproto.server.createAccount', {
      body: { handle, email: `${handle}@example.com`, password: 'multi process pw' },
    })
    expect(res.status, res.text).toBe(200)
    return { handle, did: res.body.did as string, accessJwt: res.body.accessJwt as string, refreshJwt: res.body.refreshJwt as string }
  }

  const create = (via: Proc, acct: { did: string; accessJwt: string }, rkey: string, record: Record<string, unknown> = {}) =>
    xrpc(via.url, 'com.atproto.repo.createRecord', {
      headers: bearer(acct.accessJwt),
      body: { repo: acct.did, collection: 'com.example.mp', rkey, record: { $type: 'com.example.mp', ...record } },
    })

  async function didKeyOf(via: Proc, did: string) {
    const doc = (await xrpc(via.url, 'com.atproto.identity.resolveDid', { params: { did } })).body.didDoc
    return 'did:key:' + doc.verificationMethod[0].publicKeyMultibase
  }

  async function verifiedRepo(via: Proc, did: string) {
    const car = new Uint8Array(await (await fetch(`${via.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)).arrayBuffer())
    return verifyRepoCar(car, did, await didKeyOf(via, did))
  }

  it('rotates a refresh token raced against both processes exactly once', async () => {
    const acct = await account(a)
    const tries = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        xrpc(i % 2 ? b.url : a.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: bearer(acct.refreshJwt) }),
      ),
    )
    const ok = tries.filter((r) => r.status === 200)
    expect(ok).toHaveLength(1)
    for (const r of tries.filter((r) => r.status !== 200)) expect([r.status, r.body.error]).toEqual([401, 'ExpiredToken'])
    // the one new pair works at both processes
    expect((await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(ok[0].body.accessJwt) })).status).toBe(200)
    expect(
      (await xrpc(a.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: bearer(ok[0].body.refreshJwt) })).status,
    ).toBe(200)
  })

  it('serves at one process the DID document of a handle update made through the other', async () => {
    const acct = await account(a)
    const warm = await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })
    expect(warm.body.didDoc.alsoKnownAs).toEqual([`at://${acct.handle}`])
    const handle = `mp${++n}-renamed.test`
    const upd = await xrpc(a.url, 'com.atproto.identity.updateHandle', { headers: bearer(acct.accessJwt), body: { handle } })
    expect(upd.status, upd.text).toBe(200)
    const after = await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })
    expect([after.body.handle, after.body.didDoc.alsoKnownAs]).toEqual([handle, [`at://${handle}`]])
  })

  it('serves at one process the record value written or deleted through the other', async () => {
    const acct = await account(a)
    const put = (text: string) =>
      xrpc(a.url, 'com.atproto.repo.putRecord', {
        headers: bearer(acct.accessJwt),
        body: { repo: acct.did, collection: 'com.example.mp', rkey: 'cached', record: { $type: 'com.example.mp', text } },
      })
    const readAtB = async () => {
      const one = await xrpc(b.url, 'com.atproto.repo.getRecord', {
        params: { repo: acct.did, collection: 'com.example.mp', rkey: 'cached' },
      })
      const list = await xrpc(b.url, 'com.atproto.repo.listRecords', { params: { repo: acct.did, collection: 'com.example.mp' } })
      return [one.status === 200 ? one.body.value.text : one.body.error, list.body.records.map((r: any) => r.value.text)]
    }
    expect((await put('first')).status).toBe(200)
    expect(await readAtB()).toEqual(['first', ['first']])
    expect((await put('second')).status).toBe(200)
    expect(await readAtB()).toEqual(['second', ['second']])
    const del = await xrpc(a.url, 'com.atproto.repo.deleteRecord', {
      headers: bearer(acct.accessJwt),
      body: { repo: acct.did, collection: 'com.example.mp', rkey: 'cached' },
    })
    expect(del.status).toBe(200)
    expect(await readAtB()).toEqual(['RecordNotFound', []])
  })

  it('refuses at one process a DPoP proof the other already accepted', async () => {
    const acct = await account(a)
    const key = await dpopKey()
    const sa = { url: a.url, publicUrl }
    const sb = { url: b.url, publicUrl }
    const { code, verifier } = await authorize(sa, key, { handle: acct.handle, password: 'multi process pw' })
    // the code is issued by A and redeemed at B: the store is shared
    const tokens = (await exchange(sb, key, code, verifier)).json
    expect(tokens.access_token).toBeTruthy()
    const proof = await key.proof('GET', `${publicUrl}/xrpc/com.atproto.server.getSession`, { ath: ath(tokens.access_token) })
    expect((await dpopGet(sa, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)).status).toBe(200)
    const replay = await dpopGet(sb, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)
    expect([replay.status, replay.json.error]).toEqual([401, 'InvalidToken'])
    expect((await dpopGet(sb, key, tokens.access_token, 'com.atproto.server.getSession')).status).toBe(200)
  })

  it('accepts at each process the DPoP nonce the other handed out', async () => {
    const acct = await account(a)
    const nonceOf = async (p: Proc) => {
      const res = await fetch(`${p.url}/oauth/par`, { method: 'POST' })
      await res.body?.cancel()
      return res.headers.get('dpop-nonce')!
    }
    const [nonceA, nonceB] = [await nonceOf(a), await nonceOf(b)]
    expect(nonceA && nonceB).toBeTruthy()
    // a client that learnt its nonce from one process and talks to the other
    const keyed = (key: DpopKey, nonce: string): DpopKey => ({ ...key, proof: (m, u, extra = {}) => key.proof(m, u, { nonce, ...extra }) })
    const key = await dpopKey()
    const sa = { url: a.url, publicUrl }
    const sb = { url: b.url, publicUrl }
    const parred = await par(sb, keyed(key, nonceA))
    expect(parred.status, parred.text).toBe(201)
    const { code, verifier } = await authorize(sb, keyed(key, nonceA), { handle: acct.handle, password: 'multi process pw' })
    const tokens = await exchange(sa, keyed(key, nonceB), code, verifier)
    expect(tokens.status, tokens.text).toBe(200)
    const atA = await dpopGet(sa, keyed(key, nonceB), tokens.json.access_token, 'com.atproto.server.getSession')
    const atB = await dpopGet(sb, keyed(key, nonceA), tokens.json.access_token, 'com.atproto.server.getSession')
    expect([atA.status, atB.status]).toEqual([200, 200])
  })

  it('turns 8 clients writing one repository through both processes into one linear commit chain', async () => {
    const acct = await account(a)
    const live = await subscribe(b.url)
    const per = 6
    const results = await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const out = []
        for (let i = 0; i < per; i++) out.push(await create((w + i) % 2 ? b : a, acct, `c${w}n${i}`, { w, i }))
        return out
      }),
    )
    const all = results.flat()
    for (const r of all) expect(r.status, r.text).toBe(200)
    const verified = await verifiedRepo(b, acct.did)
    expect(verified.creates.map((c) => c.rkey).sort()).toEqual(all.map((r) => r.body.uri.split('/').pop()).sort())

    // each commit builds on the one before: its `since` is the previous rev, revs strictly rise
    const mine = (f: Frame[]) => f.filter((x) => x.t === '#commit' && x.body.repo === acct.did)
    await live.until((f) => mine(f).length >= 8 * per)
    live.close()
    const commits = mine(live.frames)
    expect(commits).toHaveLength(8 * per)
    const replay = await subscribe(a.url, 0)
    await replay.until((f) => mine(f).length >= 8 * per + 1)
    replay.close()
    const chain = mine(replay.frames)
    expect(chain[0].body.since).toBeNull()
    for (let i = 1; i < chain.length; i++) {
      expect(chain[i].body.since).toBe(chain[i - 1].body.rev)
      expect(chain[i].body.rev > chain[i - 1].body.rev).toBe(true)
    }
    expect(chain.at(-1)!.body.commit.toString()).toBe(
      (await xrpc(a.url, 'com.atproto.sync.getLatestCommit', { params: { did: acct.did } })).body.cid,
    )
  })

  it('does not build on a tree one process cached once the other has written the repository', async () => {
    const acct = await account(a)
    const put = (via: Proc, rkey: string, record: Record<string, unknown>) =>
      xrpc(via.url, 'com.atproto.repo.putRecord', {
        headers: bearer(acct.accessJwt),
        body: { repo: acct.did, collection: 'com.example.mp', rkey, record: { $type: 'com.example.mp', ...record } },
      })
    const del = (via: Proc, rkey: string) =>
      xrpc(via.url, 'com.atproto.repo.deleteRecord', {
        headers: bearer(acct.accessJwt),
        body: { repo: acct.did, collection: 'com.example.mp', rkey },
      })
    // each step goes through the process that did not write last, whose cached tree is one behind
    const steps = [
      () => create(a, acct, 'x1'),
      () => create(b, acct, 'x2'),
      () => del(a, 'x2'),
      () => put(b, 'x1', { v: 2 }),
      () => create(a, acct, 'x3'),
      () => del(b, 'x1'),
      () => create(a, acct, 'x2', { again: true }),
    ]
    for (const step of steps) {
      const res = await step()
      expect(res.status, res.text).toBe(200)
    }
    const verified = await verifiedRepo(a, acct.did)
    expect(verified.creates.map((c) => c.rkey).sort()).toEqual(['x2', 'x3'])
    // every commit names the previous commit's tree as the one it changed
    const replay = await subscribe(b.url, 0)
    const mine = (f: Frame[]) => f.filter((x) => x.t === '#commit' && x.body.repo === acct.did)
    await replay.until((f) => mine(f).length >= steps.length + 1)
    replay.close()
    const chain = mine(replay.frames)
    for (let i = 1; i < chain.length; i++) {
      const prev = await readCar(chain[i - 1].body.blocks as Uint8Array)
      const prevCommit = cborDecode(prev.blocks.get(chain[i - 1].body.commit)!) as { data: unknown }
      expect(String(chain[i].body.prevData)).toBe(String(prevCommit.data))
    }
  })

  it('delivers to a consumer on B what A and B write, promptly, in order and without a gap', async () => {
    const acct = await account(a)
    const consumer = await subscribe(b.url)
    // sequential writes through A: each one's commit is on B's stream soon after A acknowledged it
    const lags: number[] = []
    for (let i = 0; i < 15; i++) {
      const r = await create(a, acct, `s${i}`)
      expect(r.status).toBe(200)
      const acked = Date.now()
      await consumer.until((f) => f.some((x) => x.t === '#commit' && x.body.rev === r.body.commit.rev), 5000)
      lags.push(Date.now() - acked)
    }
    lags.sort((x, y) => x - y)
    // without the cross-process wake-up B would only notice on its 1 s safety poll
    expect(lags[Math.floor(lags.length / 2)]).toBeLessThan(300)

    // concurrent writes through both: B's live stream is exactly the log, seq by seq
    await Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        for (let i = 0; i < 5; i++) expect((await create(w % 2 ? a : b, acct, `p${w}n${i}`)).status).toBe(200)
      }),
    )
    const total = 15 + 30
    const mine = (f: Frame[]) => f.filter((x) => x.t === '#commit' && x.body.repo === acct.did)
    await consumer.until((f) => mine(f).length >= total)
    consumer.close()
    const seqs = consumer.frames.map((f) => f.body.seq as number)
    const first = seqs[0]
    const last = seqs.at(-1)!
    expect(seqs).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i))
    const truth = await subscribe(a.url, first - 1)
    await truth.until((f) => f.some((x) => x.body.seq === last))
    truth.close()
    expect(truth.frames.map((f) => f.body.seq).filter((s) => s <= last)).toEqual(seqs)
  })

  it('hides at B a record B has cached once A takes it down, and shows it again after the reversal', async () => {
    const acct = await account(a)
    const w = await create(a, acct, 'moderated', { text: 'moderated' })
    expect(w.status).toBe(200)
    const readAtB = async () => {
      const one = await xrpc(b.url, 'com.atproto.repo.getRecord', {
        params: { repo: acct.did, collection: 'com.example.mp', rkey: 'moderated' },
      })
      const list = await xrpc(b.url, 'com.atproto.repo.listRecords', { params: { repo: acct.did, collection: 'com.example.mp' } })
      return [one.status === 200 ? one.body.value.text : one.body.error, list.body.records.map((r: any) => r.value.text)]
    }
    expect(await readAtB()).toEqual(['moderated', ['moderated']])
    const subject = { $type: 'com.atproto.repo.strongRef', uri: w.body.uri, cid: w.body.cid }
    const status = (applied: boolean) =>
      xrpc(a.url, 'com.atproto.admin.updateSubjectStatus', { headers: basic, body: { subject, takedown: { applied } } })
    expect((await status(true)).status).toBe(200)
    expect(await readAtB()).toEqual(['RecordNotFound', []])
    expect((await status(false)).status).toBe(200)
    expect(await readAtB()).toEqual(['moderated', ['moderated']])
  })

  it('enforces a takedown done through A at B on the next request', async () => {
    const acct = await account(a)
    expect((await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })).status).toBe(200)
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: acct.did }
    const down = await xrpc(a.url, 'com.atproto.admin.updateSubjectStatus', {
      headers: basic,
      body: { subject, takedown: { applied: true } },
    })
    expect(down.status).toBe(200)
    const s = await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })
    expect([s.status, s.body.error]).toEqual([403, 'AccountTakedown'])
    const w = await create(b, acct, 'after-takedown')
    expect([w.status, w.body.error]).toEqual([403, 'AccountTakedown'])
    const login = await xrpc(b.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: 'multi process pw' } })
    expect([login.status, login.body.error]).toEqual([401, 'AccountTakedown'])
  })

  it('ends at B, on the next request, the sessions a password change or an app-password revocation through A ended', async () => {
    const acct = await account(a)
    const apw = await xrpc(b.url, 'com.atproto.server.createAppPassword', { headers: bearer(acct.accessJwt), body: { name: 'mp-phone' } })
    expect(apw.status, apw.text).toBe(200)
    const phone = await xrpc(b.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: apw.body.password } })
    expect(phone.status).toBe(200)
    expect((await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(phone.body.accessJwt) })).status).toBe(200)
    expect(
      (await xrpc(a.url, 'com.atproto.server.revokeAppPassword', { headers: bearer(acct.accessJwt), body: { name: 'mp-phone' } })).status,
    ).toBe(200)
    const revoked = await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(phone.body.accessJwt) })
    expect([revoked.status, revoked.body.error]).toEqual([401, 'ExpiredToken'])
    expect((await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })).status).toBe(200)

    const changed = await xrpc(a.url, 'com.atproto.admin.updateAccountPassword', {
      headers: basic,
      body: { did: acct.did, password: 'changed through A' },
    })
    expect(changed.status, changed.text).toBe(200)
    const ended = await xrpc(b.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })
    expect([ended.status, ended.body.error]).toEqual([401, 'ExpiredToken'])
    const refresh = await xrpc(b.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: bearer(acct.refreshJwt) })
    expect([refresh.status, refresh.body.error]).toEqual([401, 'ExpiredToken'])
    const fresh = await xrpc(b.url, 'com.atproto.server.createSession', {
      body: { identifier: acct.handle, password: 'changed through A' },
    })
    expect((await xrpc(a.url, 'com.atproto.server.getSession', { headers: bearer(fresh.body.accessJwt) })).status).toBe(200)
  })

  it('keeps a space written through both processes one log: each write once, its digest, one notice per rev', async () => {
    const S = 'com.atproto.space'
    const COL = 'com.example.mp.note'
    const alice = await account(a)
    const bob = await account(b)
    const syncer = await startStandIn()
    try {
      const created = await xrpc(a.url, 'com.atproto.simplespace.createSpace', {
        headers: bearer(alice.accessJwt),
        body: {
          type: 'com.example.mp',
          skey: 'together',
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
      })
      expect(created.status, created.text).toBe(200)
      const space: string = created.body.uri
      const added = await xrpc(b.url, 'com.atproto.simplespace.addMember', {
        headers: bearer(alice.accessJwt),
        body: { space, did: bob.did },
      })
      expect(added.status, added.text).toBe(200)

      // the syncer's credential: a delegation token from A exchanged at B, and the same token
      // refused at A afterwards
      const key = await newKey()
      const { token } = (await xrpc(a.url, `${S}.getDelegationToken`, { params: { space }, headers: bearer(alice.accessJwt) })).body
      const exchangeAt = async (via: Proc) =>
        xrpc(via.url, `${S}.getSpaceCredential`, {
          body: { space },
          headers: { authorization: `Bearer ${token}`, dpop: await proof(key, 'POST', `${publicUrl}/xrpc/${S}.getSpaceCredential`) },
        })
      const exchanged = await exchangeAt(b)
      expect(exchanged.status, exchanged.text).toBe(200)
      const spent = await exchangeAt(a)
      expect([spent.status, spent.body.error]).toEqual([401, 'JwtReplayed'])
      const credential: string = exchanged.body.credential
      const asSyncer = async (via: Proc, nsid: string, params: Record<string, string>, opts: { body?: unknown; dpop?: string } = {}) => {
        const method = opts.body === undefined ? 'GET' : 'POST'
        const dpop = opts.dpop ?? (await proof(key, method, `${publicUrl}/xrpc/${nsid}`, { credential }))
        return xrpc(via.url, nsid, { method, params, body: opts.body, headers: { authorization: `DPoP ${credential}`, dpop } })
      }
      const reg = await asSyncer(a, `${S}.registerNotify`, {}, { body: { space, service: `${syncer.did}#syncer` } })
      expect(reg.status, reg.text).toBe(200)

      // a proof accepted by one process is refused by the other, both ways
      for (const [first, second] of [
        [a, b],
        [b, a],
      ]) {
        const once = await proof(key, 'GET', `${publicUrl}/xrpc/${S}.listRepos`, { credential })
        expect((await asSyncer(first, `${S}.listRepos`, { space }, { dpop: once })).status).toBe(200)
        const replayed = await asSyncer(second, `${S}.listRepos`, { space }, { dpop: once })
        expect([replayed.status, replayed.body.error]).toEqual([401, 'JwtReplayed'])
      }

      // several clients per repo through both processes at once; every third call a batch of two
      type Acct = { did: string; accessJwt: string }
      const acked = new Map<string, { rkey: string; cid: string }[]>([
        [alice.did, []],
        [bob.did, []],
      ])
      const batches = new Map<string, number[]>([
        [alice.did, []],
        [bob.did, []],
      ])
      const note = (text: string) => ({ $type: COL, text })
      const write = async (via: Proc, who: Acct, tag: string, i: number) => {
        if (i % 3 === 2) {
          const rkeys = [`${tag}a`, `${tag}b`]
          const r = await xrpc(via.url, `${S}.applyWrites`, {
            headers: bearer(who.accessJwt),
            body: {
              space,
              repo: who.did,
              writes: rkeys.map((rkey) => ({ $type: `${S}.applyWrites#create`, collection: COL, rkey, value: note(rkey) })),
            },
          })
          expect(r.status, r.text).toBe(200)
          r.body.results.forEach((res: { cid: string }, k: number) => acked.get(who.did)!.push({ rkey: rkeys[k], cid: res.cid }))
          batches.get(who.did)!.push(2)
        } else {
          const r = await xrpc(via.url, `${S}.createRecord`, {
            headers: bearer(who.accessJwt),
            body: { space, repo: who.did, collection: COL, rkey: tag, record: note(tag) },
          })
          expect(r.status, r.text).toBe(200)
          acked.get(who.did)!.push({ rkey: tag, cid: r.body.cid })
          batches.get(who.did)!.push(1)
        }
      }
      // a syncer following alice's log while she writes: pages through alternating processes (a
      // page may end inside a batch), from the cursor of a full page or after the head it reached
      type Op = { rev: string; rkey: string; cid: string | null; prev: string | null }
      const follower = (who: Acct) => {
        const ops: Op[] = []
        let at: { cursor?: string; since?: string } = {}
        let n = 0
        return {
          ops,
          async catchUp(): Promise<any> {
            for (let page = 0; page < 100; page++) {
              const res = await asSyncer(n++ % 2 ? a : b, `${S}.listRepoOps`, { space, repo: who.did, limit: '7', ...at })
              // before the first write there is no repo to follow
              if (ops.length === 0 && res.body?.error === 'RepoNotFound') return undefined
              expect(res.status, res.text).toBe(200)
              ops.push(...res.body.ops.map((o: Op) => ({ rev: o.rev, rkey: o.rkey, cid: o.cid, prev: o.prev })))
              if (res.body.cursor) at = { cursor: res.body.cursor }
              else {
                at = { since: res.body.commit.rev }
                return res.body.commit
              }
            }
            throw new Error('the log did not reach its head within 100 pages')
          },
        }
      }
      const live = follower(alice)
      let writing = true
      const following = (async () => {
        for (let i = 0; i < 1000 && writing; i++) {
          await live.catchUp()
          await sleep(20)
        }
      })()
      await Promise.all([
        ...Array.from({ length: 6 }, async (_, w) => {
          for (let i = 0; i < 6; i++) await write((w + i) % 2 ? b : a, alice, `a${w}n${i}`, i)
        }),
        ...Array.from({ length: 2 }, async (_, w) => {
          for (let i = 0; i < 6; i++) await write((w + i) % 2 ? a : b, bob, `b${w}n${i}`, i)
        }),
      ]).finally(() => (writing = false))
      await following
      const liveHead = await live.catchUp()

      const heads = new Map<string, string>()
      for (const who of [alice, bob]) {
        const didKey = await didKeyOf(a, who.did)
        // the whole log read afresh
        const log = follower(who)
        const head = await log.catchUp()
        const ops = log.ops
        expect(head).toBeDefined()
        const mine = acked.get(who.did)!
        const byRkey = (x: { rkey: string }, y: { rkey: string }) => (x.rkey < y.rkey ? -1 : 1)
        // every acknowledged write exactly once, as a create
        expect(ops.map((o) => ({ rkey: o.rkey, cid: o.cid })).sort(byRkey)).toEqual([...mine].sort(byRkey))
        expect(ops.every((o) => o.prev === null)).toBe(true)
        // one rev per call, rising, a batch's ops together: the log has no gap and no overlap
        const revs: { rev: string; n: number }[] = []
        for (const o of ops) {
          if (revs.at(-1)?.rev === o.rev) revs.at(-1)!.n++
          else revs.push({ rev: o.rev, n: 1 })
        }
        for (let i = 1; i < revs.length; i++) expect(revs[i].rev > revs[i - 1].rev).toBe(true)
        expect(revs.map((r) => r.n).sort()).toEqual([...batches.get(who.did)!].sort())
        expect(head.rev).toBe(revs.at(-1)!.rev)
        heads.set(who.did, head.rev)
        // what the syncer followed live is that log, op for op
        if (who === alice) {
          expect(live.ops).toEqual(ops)
          expect(liveHead.rev).toBe(head.rev)
        }

        // the head commit signs the digest of the records the log leaves, and so does the CAR
        const replayed = new LtHash()
        for (const o of ops) replayed.addRecord(COL, o.rkey, o.cid!)
        const commit = commitFromJson(head)
        await verifyCommit(commit, { space, author: who.did, didKey, hash: replayed.digest() })
        const car = await fetch(`${b.url}/xrpc/${S}.getRepo?${new URLSearchParams({ space, repo: who.did })}`, {
          headers: {
            authorization: `DPoP ${credential}`,
            dpop: await proof(key, 'GET', `${publicUrl}/xrpc/${S}.getRepo`, { credential }),
          },
        })
        expect(car.status).toBe(200)
        const verified = await verifySpaceCar(new Uint8Array(await car.arrayBuffer()), { space, author: who.did, didKey })
        expect(verified.entries.map((e) => ({ rkey: e.rkey, cid: e.cid.toString() })).sort(byRkey)).toEqual([...mine].sort(byRkey))
        expect(Buffer.from(verified.commit.hash).equals(Buffer.from(commit.hash))).toBe(true)

        // the syncer hears of the head, and of no rev twice
        await syncer.next(`${S}.notifyWrite`, (n) => n.repo === who.did && n.rev === head.rev)
      }
      await sleep(500)
      const heard = syncer.received.filter((r) => r.lxm === `${S}.notifyWrite`).map((r) => `${r.body.repo} ${r.body.rev}`)
      expect(heard.length).toBeGreaterThan(0)
      expect(new Set(heard).size).toBe(heard.length)
      const listed = await asSyncer(b, `${S}.listRepos`, { space })
      // the writer set is at each head: a late notification never moved it back
      expect(Object.fromEntries(listed.body.repos.map((r: { did: string; rev: string }) => [r.did, r.rev]))).toEqual(
        Object.fromEntries(heads),
      )
    } finally {
      await syncer.close()
    }
  })

  it('survives its PostgreSQL connections being terminated mid-burst: no 500, nothing acknowledged lost', async () => {
    const acct = await account(a)
    const consumer = await subscribe(b.url)
    const admin = new pg.Client({ connectionString: postgresUrl })
    await admin.connect()
    const terminate = async () => {
      const r = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()',
        [appName],
      )
      return r.rowCount ?? 0
    }
    const acked: { rkey: string; cid: string }[] = []
    const failures: { status: number; error?: string }[] = []
    let killed = 0
    try {
      const writer = async (w: number) => {
        for (let i = 0; i < 25; i++) {
          const rkey = `f${w}n${i}`
          const r = await create(w % 2 ? b : a, acct, rkey)
          if (r.status === 200) acked.push({ rkey, cid: r.body.cid })
          else failures.push({ status: r.status, error: r.body?.error })
        }
      }
      const burst = Promise.all([0, 1, 2, 3].map(writer))
      for (const at of [10, 40]) {
        for (let i = 0; i < 400 && acked.length < at; i++) await sleep(10)
        killed += await terminate()
      }
      await burst
    } finally {
      await admin.end()
    }
    expect(killed).toBeGreaterThan(0)
    // a failure, if any, is the clear temporary one, never an internal error
    for (const f of failures) expect(f).toEqual({ status: 503, error: 'TemporarilyUnavailable' })
    expect(acked.length + failures.length).toBe(100)
    expect(acked.length).toBeGreaterThanOrEqual(90)
    // both processes are still up and reconnected by themselves
    expect(a.child.exitCode).toBeNull()
    expect(b.child.exitCode).toBeNull()
    expect((await fetch(`${a.url}/xrpc/_health`)).status).toBe(200)
    expect((await fetch(`${b.url}/xrpc/_health`)).status).toBe(200)
    for (const a2 of acked) {
      const r = await xrpc(b.url, 'com.atproto.repo.getRecord', { params: { repo: acct.did, collection: 'com.example.mp', rkey: a2.rkey } })
      expect(r.status, a2.rkey).toBe(200)
      expect(r.body.cid).toBe(a2.cid)
    }
    const verified = await verifiedRepo(a, acct.did)
    const inRepo = new Set(verified.creates.map((c) => c.rkey))
    for (const a2 of acked) expect(inRepo.has(a2.rkey)).toBe(true)
    // the firehose wake-up reconnected too: a write through A reaches B's consumer promptly
    await sleep(500)
    const after = await create(a, acct, 'after-fault')
    expect(after.status).toBe(200)
    const t0 = Date.now()
    await consumer.until((f) => f.some((x) => x.t === '#commit' && x.body.rev === after.body.commit.rev), 5000)
    expect(Date.now() - t0).toBeLessThan(600)
    consumer.close()
  })
})
