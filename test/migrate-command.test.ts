// `pds migrate` between two of our servers sharing one PLC directory (@did-plc/server in-process):
// the reserved-key flow interrupted mid-blobs and resumed, and the standard atproto flow through
// the real command line (password from the environment, PLC token on the second run). The summary's
// numbers are checked against what the servers answer. Permissioned repos, which no server can
// import yet, are saved from the origin and stay readable there; governed spaces move.
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { verifyRepoCar } from '@atproto/repo'
import { Secp256k1Keypair } from '@atproto/crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount, PASSWORD, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'
import { sinkEnv, type MailSink } from './mail-sink.js'
import { runMigration, SPACES_FILE } from '../src/cli/migrate.js'
import { verifySpaceCar } from '../src/space/car.js'
import { startMovePair, type MovePair } from './move-pair.js'

const CLI = new URL('../dist/cli/index.js', import.meta.url).pathname

let plcUrl: string
let sink: MailSink
let origin: TestPds
let dest: TestPds

/** an account on the origin with `records` posts and `blobs` images, one blob per post */
async function seed(handle: string, email: string, records: number, blobs: number) {
  const created = await xrpc(origin.url, 'com.atproto.server.createAccount', { body: { handle, email, password: PASSWORD } })
  expect(created.status).toBe(200)
  const { did, accessJwt } = created.body
  const refs: any[] = []
  for (let i = 0; i < blobs; i++) {
    const res = await fetch(`${origin.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(accessJwt), 'content-type': 'image/png' },
      body: randomBytes(2000 + i),
    })
    expect(res.status).toBe(200)
    refs.push(((await res.json()) as any).blob)
  }
  const writes = Array.from({ length: records }, (_, i) => ({
    $type: 'com.atproto.repo.applyWrites#create',
    collection: 'app.bsky.feed.post',
    rkey: `p${String(i).padStart(4, '0')}`,
    value: {
      $type: 'app.bsky.feed.post',
      text: `post ${i}`,
      createdAt: new Date().toISOString(),
      ...(i < blobs ? { embed: { $type: 'app.bsky.embed.images', images: [{ image: refs[i], alt: '' }] } } : {}),
    },
  }))
  for (let i = 0; i < writes.length; i += 50) {
    const res = await xrpc(origin.url, 'com.atproto.repo.applyWrites', {
      headers: bearer(accessJwt),
      body: { repo: did, writes: writes.slice(i, i + 50) },
    })
    expect(res.status).toBe(200)
  }
  const prefs = await xrpc(origin.url, 'app.bsky.actor.putPreferences', {
    headers: bearer(accessJwt),
    body: { preferences: [{ $type: 'app.bsky.actor.defs#adultContentPref', enabled: true }] },
  })
  expect(prefs.status).toBe(200)
  return { did: did as string }
}

/** what the destination holds for `did`, read without the command */
async function destinationState(did: string) {
  const repo = await fetch(`${dest.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
  expect(repo.status).toBe(200)
  const doc: any = await (await fetch(`${plcUrl}/${did}`)).json()
  const key = ((await (await fetch(`${plcUrl}/${did}/data`)).json()) as any).verificationMethods.atproto
  const verified = await verifyRepoCar(new Uint8Array(await repo.arrayBuffer()), did, key)
  const blobs = await xrpc(dest.url, 'com.atproto.sync.listBlobs', { params: { did, limit: '1000' } })
  return { records: verified.creates.length, blobs: blobs.body.cids.length, endpoint: doc.service[0].serviceEndpoint }
}

function runCli(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

describe('pds migrate', () => {
  let pair: MovePair | undefined
  beforeAll(async () => {
    pair = await startMovePair()
    ;({ plcUrl, sink, origin, dest } = pair)
  })
  afterAll(async () => {
    await pair?.stop()
  })

  it('reserved-key flow: interrupted after 4 of 12 blobs, the second run uploads only the other 8', async () => {
    const { did } = await seed('walker.test', 'walker@example.com', 60, 12)
    const lines: string[] = []
    const abort = new AbortController()
    let uploads = 0
    const askToken = async () => {
      await sink.waitFor(sink.received.length)
      return sink.tokenFor('walker@example.com')
    }
    const opts = { from: origin.url, to: dest.url, handle: 'walker.test', password: PASSWORD, plcUrl }
    await expect(
      runMigration(opts, {
        log: (l) => {
          lines.push(l)
          if (/^\s+blobs \[/.test(l) && ++uploads === 4) abort.abort()
        },
        askToken,
        signal: abort.signal,
      }),
    ).rejects.toThrow(/interrupted/)
    expect(lines.some((l) => l.includes('reserved-key migration flow'))).toBe(true)
    const mid = await xrpc(dest.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
    const status = await xrpc(dest.url, 'com.atproto.server.checkAccountStatus', { headers: bearer(mid.body.accessJwt) })
    expect(status.body).toMatchObject({ activated: false, indexedRecords: 60, expectedBlobs: 12, importedBlobs: 4 })

    const again: string[] = []
    const summary = await runMigration(opts, { log: (l) => again.push(l), askToken })
    expect(again).toContain('      already created there: resuming')
    expect(summary).toMatchObject({
      did,
      flow: 'spec',
      resumed: true,
      records: { origin: 60, destination: 60 },
      blobs: { origin: 12, destination: 12, uploaded: 8 },
      signature: { valid: true },
      active: true,
    })
    expect(again.at(-1)).toBe('migration complete')
    // the numbers match what the servers say
    const state = await destinationState(did)
    expect(state).toEqual({ records: 60, blobs: 12, endpoint: dest.env.PDS_PUBLIC_URL })
    const prefs = await xrpc(dest.url, 'app.bsky.actor.getPreferences', { headers: bearer(mid.body.accessJwt) })
    expect(prefs.body.preferences).toEqual([{ $type: 'app.bsky.actor.defs#adultContentPref', enabled: true }])
    const originStatus = await xrpc(origin.url, 'com.atproto.sync.getRepoStatus', { params: { did } })
    expect(originStatus.body.active).toBe(false)
  })

  it('standard flow through the command line: no terminal, the PLC token on the second run', async () => {
    const { did } = await seed('stepper.test', 'stepper@example.com', 30, 5)
    const args = ['migrate', '--from', origin.url, '--to', dest.url, '--handle', 'stepper.test', '--flow', 'standard']
    const env = { PDS_MIGRATE_PASSWORD: PASSWORD, PDS_DID_PLC_URL: plcUrl }
    const before = sink.received.length
    const first = await runCli(args, env)
    expect(first.code).toBe(1)
    expect(first.stderr).toContain('run the command again with --plc-token')
    expect(first.stdout).toContain('standard atproto migration')
    expect(first.stdout).toMatch(/blobs \[#+\] 5\/5/)
    // the password never appears in what the command prints
    expect(first.stdout + first.stderr).not.toContain(PASSWORD)
    await sink.waitFor(before + 1)
    const token = sink.tokenFor('stepper@example.com')

    const second = await runCli([...args, '--plc-token', token], env)
    expect(second.stderr).toBe('')
    expect(second.code).toBe(0)
    expect(second.stdout).toContain('already created there: resuming')
    expect(second.stdout).toContain('records:    30 on the destination (origin had 30)')
    expect(second.stdout).toContain('blobs:      5 on the destination (origin had 5; 0 uploaded')
    expect(second.stdout).toMatch(/signature: {2}valid against did:key:z/)
    expect(second.stdout).toContain('status:     active')
    expect(second.stdout.trim().split('\n').at(-1)).toBe('migration complete')
    expect(await destinationState(did)).toEqual({ records: 30, blobs: 5, endpoint: dest.env.PDS_PUBLIC_URL })
    const login = await xrpc(dest.url, 'com.atproto.server.createSession', { body: { identifier: 'stepper.test', password: PASSWORD } })
    expect(login.body).toMatchObject({ did, active: true })
    expect(login.body.didDoc.service[0].serviceEndpoint).toBe(dest.env.PDS_PUBLIC_URL)
  })

  it('refuses before anything is signed when either server keeps its DIDs in a local log', async () => {
    const { did } = await seed('lonely.test', 'lonely@example.com', 1, 0)
    const local = await startTestPds({ PDS_HOSTNAME: 'pds3.localhost', ...sinkEnv(sink) })
    try {
      const mails = sink.received.length
      for (const [from, to] of [
        [origin.url, local.url],
        [local.url, dest.url],
      ]) {
        const lines: string[] = []
        await expect(
          runMigration(
            { from, to, handle: 'lonely.test', password: PASSWORD, plcUrl },
            { log: (l) => lines.push(l), askToken: async () => 'never' },
          ),
        ).rejects.toThrow(`${local.url} keeps DIDs in its own local log`)
        expect(lines).toEqual([])
      }
      // no account was made on the local-log server, no token mailed, the origin account unchanged
      const there = await xrpc(local.url, 'com.atproto.sync.getRepoStatus', { params: { did } })
      expect(there.body.error).toBe('RepoNotFound')
      expect(sink.received.length).toBe(mails)
      const status = await xrpc(origin.url, 'com.atproto.sync.getRepoStatus', { params: { did } })
      expect(status.body).toMatchObject({ did, active: true })
    } finally {
      await local.stop()
    }
  })

  it('standard destination: service-auth createAccount and submitPlcOperation refuse what does not fit', async () => {
    const { did } = await seed('checker.test', 'checker@example.com', 1, 0)
    const login = await xrpc(origin.url, 'com.atproto.server.createSession', { body: { identifier: 'checker.test', password: PASSWORD } })
    const jwt = login.body.accessJwt
    const destDid = (await xrpc(dest.url, 'com.atproto.server.describeServer')).body.did
    const svc = async (aud: string, lxm = 'com.atproto.server.createAccount') =>
      (await xrpc(origin.url, 'com.atproto.server.getServiceAuth', { headers: bearer(jwt), params: { aud, lxm } })).body.token
    const body = { did, handle: 'checker.test', email: 'checker@example.com', password: PASSWORD }
    const create = (token?: string, b: Record<string, unknown> = body) =>
      xrpc(dest.url, 'com.atproto.server.createAccount', { headers: token ? bearer(token) : {}, body: b })
    // no token: the DID cannot be claimed
    expect((await create()).body.error).toBe('InvalidRequest')
    // a token for another audience, for another method, or for another DID (the service-auth
    // error names every atproto service gives)
    expect((await create(await svc('did:web:elsewhere.test'))).body).toMatchObject({ error: 'BadJwtAudience' })
    expect((await create(await svc(destDid, 'com.atproto.repo.importRepo'))).body).toMatchObject({ error: 'BadJwtLexiconMethod' })
    const other = await seed('other.test', 'other@example.com', 1, 0)
    const wrongDid = await create(await svc(destDid), { ...body, did: other.did })
    expect([wrongDid.status, wrongDid.body.error]).toEqual([400, 'InvalidRequest'])
    // a token signed by a key the DID document does not name
    const [h, p] = (await svc(destDid)).split('.')
    expect((await create(`${h}.${p}.${Buffer.alloc(64, 1).toString('base64url')}`)).body.error).toBe('BadJwtSignature')
    // nothing was created by any of that
    expect((await xrpc(dest.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })).status).toBe(401)

    const ok = await create(await svc(destDid))
    expect(ok.status).toBe(200)
    expect(ok.body.didDoc).toBeUndefined()
    const destJwt = ok.body.accessJwt
    const status = await xrpc(dest.url, 'com.atproto.server.checkAccountStatus', { headers: bearer(destJwt) })
    expect(status.body).toMatchObject({ activated: false, validDid: false })
    expect((await create(await svc(destDid))).body.error).toBe('AccountAlreadyExists')

    // submitPlcOperation: an operation that does not name this server's key and endpoint
    const creds = (await xrpc(dest.url, 'com.atproto.identity.getRecommendedDidCredentials', { headers: bearer(destJwt) })).body
    expect(creds.services.atproto_pds.endpoint).toBe(dest.env.PDS_PUBLIC_URL)
    const submit = (operation: Record<string, unknown>) =>
      xrpc(dest.url, 'com.atproto.identity.submitPlcOperation', { headers: bearer(destJwt), body: { operation } })
    const stranger = (await Secp256k1Keypair.create()).did()
    const base = { type: 'plc_operation', ...creds, prev: 'bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua', sig: 'c2ln' }
    const wrongKey = await submit({ ...base, verificationMethods: { atproto: stranger } })
    expect(wrongKey.body.message).toMatch(/signing key/)
    const wrongPds = await submit({
      ...base,
      services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://elsewhere.test' } },
    })
    expect(wrongPds.body.message).toMatch(/atproto_pds/)
    const noRotation = await submit({ ...base, rotationKeys: [stranger] })
    expect(noRotation.body.message).toMatch(/rotation key/)
    // a fitting operation with a bad signature: the directory refuses it, nothing is stored
    const badSig = await submit(base)
    expect(badSig.status).toBe(400)
    expect(badSig.body.message).toMatch(/PLC directory refused/)
    const after = await xrpc(dest.url, 'com.atproto.server.checkAccountStatus', { headers: bearer(destJwt) })
    expect(after.body.validDid).toBe(false)
  })

  it("saves the account's permissioned repos from the origin, keeps them readable there, and moves the spaces it governs", async () => {
    const { did } = await seed('spacer.test', 'spacer@example.com', 2, 0)
    const login = await xrpc(origin.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
    const jwt = login.body.accessJwt
    const friend = await newAccount(origin.url, 'friend')
    const COL = 'com.example.group.post'
    const governed = await xrpc(origin.url, 'com.atproto.simplespace.createSpace', {
      headers: bearer(jwt),
      body: {
        type: 'com.example.group',
        skey: 'family',
        policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
        appAccess: { $type: 'com.atproto.simplespace.defs#open' },
      },
    })
    const space = governed.body.uri
    await xrpc(origin.url, 'com.atproto.simplespace.addMember', { headers: bearer(jwt), body: { space, did: friend.did } })
    const theirs = `at://${friend.did}/space/com.example.group/club`
    const blobBytes = randomBytes(1500)
    const up = await fetch(`${origin.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(jwt), 'content-type': 'image/png' },
      body: blobBytes,
    })
    const { blob } = (await up.json()) as { blob: { ref: { $link: string } } }
    const record = (text: string, extra = {}) => ({ $type: COL, text, createdAt: new Date().toISOString(), ...extra })
    for (const [sp, rkey, value] of [
      [space, 'a', record('mine')],
      [space, 'b', record('with a picture', { file: blob })],
      [theirs, 'c', record('in a friend space')],
    ] as const) {
      const res = await xrpc(origin.url, 'com.atproto.space.createRecord', {
        headers: bearer(jwt),
        body: { space: sp, repo: did, collection: COL, rkey, record: value },
      })
      expect(res.status, res.text).toBe(200)
    }
    const oldKey = ((await (await fetch(`${plcUrl}/${did}/data`)).json()) as any).verificationMethods.atproto

    const spacesDir = join(tempDir(), 'spaces')
    const lines: string[] = []
    const askToken = async () => {
      await sink.waitFor(sink.received.length)
      return sink.tokenFor('spacer@example.com')
    }
    const opts = { from: origin.url, to: dest.url, handle: 'spacer.test', password: PASSWORD, plcUrl, spacesDir }
    const summary = await runMigration(opts, { log: (l) => lines.push(l), askToken })
    expect(summary).toMatchObject({ active: true, spaces: { repos: 2, savedTo: spacesDir, governed: 1, recreated: 1 } })
    expect(lines).toContain('      no server can import a permissioned repo yet: the destination starts without them; they stay on')

    // what was saved: both repos, verifiable with the key that signed them, and the blob
    const saved = JSON.parse(readFileSync(join(spacesDir, SPACES_FILE), 'utf8'))
    expect(saved.repos.map((r: any) => [r.space, r.records, r.blobs])).toEqual(
      [
        [space, 2, [blob.ref.$link]],
        [theirs, 1, []],
      ].sort((x, y) => (x[0] < y[0] ? -1 : 1)),
    )
    for (const r of saved.repos) {
      const car = await verifySpaceCar(new Uint8Array(readFileSync(join(spacesDir, r.file))), {
        space: r.space,
        author: did,
        didKey: oldKey,
      })
      expect(car.commit.rev).toBe(r.rev)
    }
    expect(readFileSync(join(spacesDir, 'blobs', blob.ref.$link)).equals(blobBytes)).toBe(true)
    expect(saved.governed).toEqual([
      expect.objectContaining({ space, policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' }, members: [friend.did] }),
    ])

    // the origin still holds them, for the (now deactivated) account itself
    const kept = await xrpc(origin.url, 'com.atproto.space.getRecord', {
      headers: bearer(jwt),
      params: { space, repo: did, collection: COL, rkey: 'a' },
    })
    expect(kept.status, kept.text).toBe(200)
    // the governed space and its members are on the destination, which its DID document names now
    const destLogin = await xrpc(dest.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
    const there = await xrpc(dest.url, 'com.atproto.simplespace.listMembers', {
      headers: bearer(destLogin.body.accessJwt),
      params: { space },
    })
    expect(there.body.members).toEqual([{ did: friend.did }])

    // a second run uses what it saved: the origin no longer answers for the spaces it governed
    const again: string[] = []
    const rerun = await runMigration(opts, { log: (l) => again.push(l), askToken })
    expect(rerun.spaces).toMatchObject({ repos: 2, governed: 1, recreated: 1 })
    expect(again).toContain(`      already saved in ${spacesDir}: 2 permissioned repos, 1 spaces governed`)
    expect(existsSync(join(spacesDir, '0001.car'))).toBe(true)
  })
})
