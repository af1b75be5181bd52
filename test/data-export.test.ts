// "Download your data": an account's repository, blobs and preferences exported through the
// operator CLI (`pds account export`) and the account page's download, then imported into a second
// server sharing the PLC directory, through `pds migrate --from-export` both with the origin (a
// whole move whose data comes from the download) and without it (into an account created there
// deactivated, activated once the DID document names the destination).
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { verifyRepoCar } from '@atproto/repo'
import { x as untar } from 'tar'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, PASSWORD, tempDir, xrpc, type TestPds } from './harness.js'
import { runCli } from './cli-run.js'
import { csrfOf, pageClient } from './page-client.js'
import { startMovePair, type MovePair } from './move-pair.js'
import type { MailSink } from './mail-sink.js'
import { openExport, runMigration } from '../src/cli/migrate.js'
import { verifySpaceCar } from '../src/space/car.js'

let pair: MovePair | undefined
let origin: TestPds
let dest: TestPds
let sink: MailSink
let plcUrl: string

const PREFS = [
  { $type: 'app.bsky.actor.defs#adultContentPref', enabled: true },
  { $type: 'app.bsky.actor.defs#personalDetailsPref', birthDate: '1990-04-01T00:00:00.000Z' },
]

type Seeded = { did: string; handle: string; email: string; token: string; blobs: Map<string, Buffer> }

/** an account on the origin with three posts, two of them with an image, and two preferences */
async function seed(name: string): Promise<Seeded> {
  const handle = `${name}.test`
  const email = `${name}@example.com`
  const created = await xrpc(origin.url, 'com.atproto.server.createAccount', { body: { handle, email, password: PASSWORD } })
  expect(created.status, created.text).toBe(200)
  const { did, accessJwt: token } = created.body
  const blobs = new Map<string, Buffer>()
  const refs: unknown[] = []
  for (let i = 0; i < 2; i++) {
    const bytes = randomBytes(3000 + i * 700)
    const res = await fetch(`${origin.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': i ? 'image/jpeg' : 'image/png' },
      body: bytes,
    })
    expect(res.status).toBe(200)
    const { blob } = (await res.json()) as { blob: { ref: { $link: string } } }
    blobs.set(blob.ref.$link, bytes)
    refs.push(blob)
  }
  for (let i = 0; i < 3; i++) {
    const res = await xrpc(origin.url, 'com.atproto.repo.createRecord', {
      headers: bearer(token),
      body: {
        repo: did,
        collection: 'app.bsky.feed.post',
        record: {
          $type: 'app.bsky.feed.post',
          text: `post ${i} of ${name}`,
          createdAt: new Date().toISOString(),
          ...(i < 2 ? { embed: { $type: 'app.bsky.embed.images', images: [{ image: refs[i], alt: `image ${i}` }] } } : {}),
        },
      },
    })
    expect(res.status, res.text).toBe(200)
  }
  const prefs = await xrpc(origin.url, 'app.bsky.actor.putPreferences', { headers: bearer(token), body: { preferences: PREFS } })
  expect(prefs.status, prefs.text).toBe(200)
  return { did, handle, email, token, blobs }
}

const records = async (url: string, did: string) =>
  (await xrpc(url, 'com.atproto.repo.listRecords', { params: { repo: did, collection: 'app.bsky.feed.post' } })).body.records

async function blobBytes(url: string, did: string, cid: string): Promise<Buffer> {
  const res = await fetch(`${url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`)
  expect(res.status, `getBlob ${cid}`).toBe(200)
  return Buffer.from(await res.arrayBuffer())
}

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'))

/** signs the account in on the account page with its password (which also counts as a fresh confirmation) */
async function accountPage(a: Seeded) {
  const http = pageClient(origin.url)
  const csrf = csrfOf((await http.get('/account?view=login')).text)
  const signedIn = await http.post('/account/sign-in', { csrf_token: csrf, handle: a.handle, password: PASSWORD })
  expect(signedIn.status).toBe(303)
  return http
}

/** the account page's download, as the browser receives it */
async function download(http: ReturnType<typeof pageClient>) {
  const page = await http.get('/account')
  expect(page.text).toContain('Download your data')
  const cookie = [...http.jar].map(([k, v]) => `${k}=${v}`).join('; ')
  return fetch(`${origin.url}/account/export`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf_token: csrfOf(page.text) }).toString(),
    redirect: 'manual',
  })
}

describe('download your data', () => {
  let alice: Seeded
  let cliDir: string
  let tarFile: string

  beforeAll(async () => {
    pair = await startMovePair()
    ;({ origin, dest, sink, plcUrl } = pair)
    alice = await seed(`exp${randomBytes(3).toString('hex')}`)
  })
  afterAll(async () => {
    await pair?.stop()
  })

  it('pds account export writes the repository, every blob, the preferences and a manifest into a new directory', async () => {
    cliDir = join(tempDir(), 'alice-export')
    const run = await runCli(origin.env, 'account', 'export', alice.handle, cliDir)
    expect(run.err).toBe('')
    expect(run.code).toBe(0)
    expect(run.out).toContain(`dir: ${cliDir}`)
    expect(run.out).toMatch(/repo: repo\.car \(\d+ bytes, 3 records, rev \w+\)/)
    expect(run.out).toContain('blobs: blobs/ (2 files, ')
    expect(run.out).toContain('preferences: preferences.json (2)')

    expect(readdirSync(cliDir).sort()).toEqual(['blobs', 'manifest.json', 'preferences.json', 'repo.car'])
    // the CAR is getRepo's, and verifies against the DID document's key
    const car = readFileSync(join(cliDir, 'repo.car'))
    const served = Buffer.from(await (await fetch(`${origin.url}/xrpc/com.atproto.sync.getRepo?did=${alice.did}`)).arrayBuffer())
    expect(car.equals(served)).toBe(true)
    const key = ((await (await fetch(`${plcUrl}/${alice.did}/data`)).json()) as any).verificationMethods.atproto
    expect((await verifyRepoCar(new Uint8Array(car), alice.did, key)).creates).toHaveLength(3)
    // every blob under its CID, byte for byte
    expect(readdirSync(join(cliDir, 'blobs')).sort()).toEqual([...alice.blobs.keys()].sort())
    for (const [cid, bytes] of alice.blobs) expect(readFileSync(join(cliDir, 'blobs', cid)).equals(bytes)).toBe(true)
    // the preferences as getPreferences gives them to the owner, personal details included
    const prefs = await xrpc(origin.url, 'app.bsky.actor.getPreferences', { headers: bearer(alice.token) })
    expect(readJson(join(cliDir, 'preferences.json'))).toEqual(prefs.body)
    expect(prefs.body.preferences).toEqual(PREFS)

    const head = await xrpc(origin.url, 'com.atproto.sync.getLatestCommit', { params: { did: alice.did } })
    const manifest = readJson(join(cliDir, 'manifest.json'))
    expect(manifest).toMatchObject({
      format: 'atproto-account-export',
      version: 1,
      did: alice.did,
      handle: alice.handle,
      repo: { file: 'repo.car', commit: head.body.cid, rev: head.body.rev, bytes: car.length },
      preferences: { file: 'preferences.json' },
      counts: { records: 3, blobs: 2, preferences: 2, blobBytes: 3000 + 3700 },
    })
    expect(Date.now() - Date.parse(manifest.exportedAt)).toBeLessThan(60_000)
    expect(manifest.blobs).toEqual(
      [...alice.blobs]
        .map(([cid, bytes]) => ({ cid, size: bytes.length, mimeType: bytes.length === 3000 ? 'image/png' : 'image/jpeg' }))
        .sort((a, b) => (a.cid < b.cid ? -1 : 1)),
    )
  })

  it('pds account export refuses an unknown account, a directory that is not empty and a taken-down account, in one line', async () => {
    const unknown = await runCli(origin.env, 'account', 'export', 'nobody-here.test', join(tempDir(), 'x'))
    expect(unknown.code).toBe(1)
    expect(unknown.err).toBe('pds: no account nobody-here.test\n')

    const full = tempDir()
    writeFileSync(join(full, 'notes.txt'), 'mine')
    const notEmpty = await runCli(origin.env, 'account', 'export', alice.handle, full)
    expect(notEmpty.code).toBe(1)
    expect(notEmpty.err).toBe(`pds: ${full} is not empty\n`)
    expect(readdirSync(full)).toEqual(['notes.txt'])
    expect(notEmpty.out).toBe('')

    // a taken-down account's repository is not handed out, here as on getRepo
    const held = await seed(`tkd${randomBytes(3).toString('hex')}`)
    expect((await runCli(origin.env, 'account', 'takedown', held.did)).code).toBe(0)
    const dir = join(tempDir(), 'held')
    const takenDown = await runCli(origin.env, 'account', 'export', held.handle, dir)
    expect(takenDown.code).toBe(1)
    expect(takenDown.err).toBe(`pds: account ${held.did} is takendown\n`)
    expect(existsSync(dir)).toBe(false)
  })

  it('pds account export --json prints the manifest and where it wrote', async () => {
    const dir = join(tempDir(), 'as-json')
    const run = await runCli(origin.env, 'account', 'export', alice.did, dir, '--json')
    expect(run.code).toBe(0)
    const printed = JSON.parse(run.out)
    expect(printed).toEqual({ dir, ...readJson(join(dir, 'manifest.json')) })
    expect(printed.counts).toMatchObject({ records: 3, blobs: 2 })
  })

  it('pds account export writes every permissioned repo as a CAR and the spaces the account governs', async () => {
    const owner = await seed(`spc${randomBytes(3).toString('hex')}`)
    const COL = 'com.example.group.post'
    const mine = (
      await xrpc(origin.url, 'com.atproto.simplespace.createSpace', {
        headers: bearer(owner.token),
        body: {
          type: 'com.example.group',
          skey: 'home',
          policy: { $type: 'com.atproto.simplespace.defs#publicPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
      })
    ).body.uri
    await xrpc(origin.url, 'com.atproto.simplespace.addMember', { headers: bearer(owner.token), body: { space: mine, did: alice.did } })
    const [cid] = [...owner.blobs.keys()]
    const elsewhere = `at://${alice.did}/space/com.example.group/other`
    for (const [space, rkey, extra] of [
      [mine, 'one', { file: { $type: 'blob', ref: { $link: cid }, mimeType: 'image/png', size: owner.blobs.get(cid)!.length } }],
      [elsewhere, 'two', {}],
    ] as const) {
      const res = await xrpc(origin.url, 'com.atproto.space.createRecord', {
        headers: bearer(owner.token),
        body: {
          space,
          repo: owner.did,
          collection: COL,
          rkey,
          record: { $type: COL, text: rkey, createdAt: new Date().toISOString(), ...extra },
        },
      })
      expect(res.status, res.text).toBe(200)
    }
    const dir = join(tempDir(), 'with-spaces')
    const run = await runCli(origin.env, 'account', 'export', owner.did, dir)
    expect(run.err).toBe('')
    expect(run.out).toContain('spaces: spaces/ (2 permissioned repos; 1 spaces governed)')
    const manifest = readJson(join(dir, 'manifest.json'))
    const byUri = [mine, elsewhere].sort()
    expect(manifest.spaces.repos.map((r: any) => r.space)).toEqual(byUri)
    expect(manifest.spaces.repos.find((r: any) => r.space === mine)).toMatchObject({ records: 1, blobs: [cid] })
    expect(manifest.spaces.governed).toEqual([
      {
        space: mine,
        type: 'com.example.group',
        skey: 'home',
        policy: { $type: 'com.atproto.simplespace.defs#publicPolicy' },
        appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        members: [alice.did],
      },
    ])
    // each CAR is what space.getRepo hands out, checked end to end; the blob is among the export's
    const key = ((await (await fetch(`${plcUrl}/${owner.did}/data`)).json()) as any).verificationMethods.atproto
    for (const r of manifest.spaces.repos) {
      const car = await verifySpaceCar(new Uint8Array(readFileSync(join(dir, r.file))), { space: r.space, author: owner.did, didKey: key })
      expect(car.commit.rev).toBe(r.rev)
      expect(car.entries).toHaveLength(1)
    }
    expect(readFileSync(join(dir, 'blobs', cid)).equals(owner.blobs.get(cid)!)).toBe(true)
  })

  it('the account page downloads the same export as one tar archive', async () => {
    const res = await download(await accountPage(alice))
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('application/x-tar')
    const name = `${alice.handle}-${new Date().toISOString().slice(0, 10)}`
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${name}.tar"`)
    expect(res.headers.get('cache-control')).toBe('no-store')
    tarFile = join(tempDir(), `${name}.tar`)
    writeFileSync(tarFile, Buffer.from(await res.arrayBuffer()))

    const out = tempDir()
    await untar({ file: tarFile, cwd: out, strict: true })
    expect(readdirSync(out)).toEqual([name])
    const got = join(out, name)
    expect(readdirSync(got).sort()).toEqual(['blobs', 'manifest.json', 'preferences.json', 'repo.car'])
    // nothing was written in between: the same bytes as the operator's export
    expect(readFileSync(join(got, 'repo.car')).equals(readFileSync(join(cliDir, 'repo.car')))).toBe(true)
    for (const [cid, bytes] of alice.blobs) expect(readFileSync(join(got, 'blobs', cid)).equals(bytes)).toBe(true)
    expect(readJson(join(got, 'preferences.json'))).toEqual(readJson(join(cliDir, 'preferences.json')))
    const { exportedAt: _a, ...fromPage } = readJson(join(got, 'manifest.json'))
    const { exportedAt: _b, ...fromCli } = readJson(join(cliDir, 'manifest.json'))
    expect(fromPage).toEqual(fromCli)
  })

  it('the download needs a sign-in on the page', async () => {
    const http = pageClient(origin.url)
    const csrf = csrfOf((await http.get('/account?view=login')).text)
    const res = await http.post('/account/export', { csrf_token: csrf })
    expect(res.status).toBe(303)
    expect(res.text).not.toContain('manifest.json')
    expect((await http.get('/account')).text).toContain('Sign in to continue.')
  })

  it('pds migrate --from-export with the origin moves the account with the data from the download', async () => {
    const before = await records(origin.url, alice.did)
    const lines: string[] = []
    const source = await openExport(tarFile)
    try {
      const summary = await runMigration(
        { from: origin.url, to: dest.url, handle: alice.handle, password: PASSWORD, plcUrl, flow: 'standard', fromExport: source },
        {
          log: (l) => lines.push(l),
          askToken: async () => {
            await sink.waitFor(sink.received.length)
            return sink.tokenFor(alice.email)
          },
        },
      )
      expect(summary).toMatchObject({
        did: alice.did,
        records: { origin: 3, destination: 3 },
        blobs: { destination: 2, uploaded: 2 },
        signature: { valid: true },
        active: true,
      })
    } finally {
      await source.close()
    }
    expect(lines.some((l) => l.includes(`from ${tarFile}`))).toBe(true)
    expect(lines.at(-1)).toBe('migration complete')
    // the destination serves the same records, blobs and preferences
    expect(await records(dest.url, alice.did)).toEqual(before)
    for (const [cid, bytes] of alice.blobs) expect((await blobBytes(dest.url, alice.did, cid)).equals(bytes)).toBe(true)
    const login = await xrpc(dest.url, 'com.atproto.server.createSession', { body: { identifier: alice.did, password: PASSWORD } })
    const prefs = await xrpc(dest.url, 'app.bsky.actor.getPreferences', { headers: bearer(login.body.accessJwt) })
    expect(prefs.body.preferences).toEqual(PREFS)
  })

  it('pds migrate --from-export imports into an account created deactivated on the destination, active once its DID names it', async () => {
    const bob = await seed(`imp${randomBytes(3).toString('hex')}`)
    const dir = join(tempDir(), 'bob')
    expect((await runCli(origin.env, 'account', 'export', bob.did, dir)).code).toBe(0)
    const before = await records(origin.url, bob.did)

    // the destination account, as a migration makes it: the DID proven with a service token from the origin
    const destDid = (await xrpc(dest.url, 'com.atproto.server.describeServer')).body.did
    const svc = await xrpc(origin.url, 'com.atproto.server.getServiceAuth', {
      headers: bearer(bob.token),
      params: { aud: destDid, lxm: 'com.atproto.server.createAccount' },
    })
    expect(svc.status, svc.text).toBe(200)
    const created = await xrpc(dest.url, 'com.atproto.server.createAccount', {
      headers: bearer(svc.body.token),
      body: { did: bob.did, handle: bob.handle, email: bob.email, password: PASSWORD },
    })
    expect(created.status, created.text).toBe(200)
    const destToken: string = created.body.accessJwt

    const env = { PDS_MIGRATE_PASSWORD: PASSWORD, PDS_DID_PLC_URL: plcUrl }
    const first = await runCli(env, 'migrate', '--from-export', dir, '--to', dest.url)
    expect(first.err).toBe('')
    expect(first.code).toBe(0)
    expect(first.out).toContain('2 uploaded')
    expect(first.out).toContain(`the DID document does not name ${dest.url} yet`)
    expect(first.out.trim().split('\n').at(-1)).toBe('import complete; activate once the DID document names the destination')
    const status = await xrpc(dest.url, 'com.atproto.server.checkAccountStatus', { headers: bearer(destToken) })
    expect(status.body).toMatchObject({ activated: false, indexedRecords: 3, expectedBlobs: 2, importedBlobs: 2 })
    // still deactivated, yet its records and preferences are there
    expect(await records(dest.url, bob.did)).toEqual(before)
    const prefs = await xrpc(dest.url, 'app.bsky.actor.getPreferences', { headers: bearer(destToken) })
    expect(prefs.body.preferences).toEqual(PREFS)

    // the identity moves as in a migration; the same command then activates the account
    const creds = await xrpc(dest.url, 'com.atproto.identity.getRecommendedDidCredentials', { headers: bearer(destToken) })
    const mails = sink.received.length
    expect(
      (await xrpc(origin.url, 'com.atproto.identity.requestPlcOperationSignature', { method: 'POST', headers: bearer(bob.token) })).status,
    ).toBe(200)
    await sink.waitFor(mails + 1)
    const signed = await xrpc(origin.url, 'com.atproto.identity.signPlcOperation', {
      headers: bearer(bob.token),
      body: { token: sink.tokenFor(bob.email), ...creds.body },
    })
    expect(signed.status, signed.text).toBe(200)
    const submitted = await xrpc(dest.url, 'com.atproto.identity.submitPlcOperation', {
      headers: bearer(destToken),
      body: { operation: signed.body.operation },
    })
    expect(submitted.status, submitted.text).toBe(200)

    const second = await runCli(env, 'migrate', '--from-export', dir, '--to', dest.url)
    expect(second.code).toBe(0)
    expect(second.out).toContain('already imported')
    expect(second.out).toContain('0 uploaded')
    expect(second.out.trim().split('\n').at(-1)).toBe('import complete')
    expect((await xrpc(dest.url, 'com.atproto.sync.getRepoStatus', { params: { did: bob.did } })).body.active).toBe(true)
    for (const [cid, bytes] of bob.blobs) expect((await blobBytes(dest.url, bob.did, cid)).equals(bytes)).toBe(true)
  })

  it('pds migrate --from-export refuses a directory without an export, and an account missing on the destination', async () => {
    const env = { PDS_MIGRATE_PASSWORD: PASSWORD, PDS_DID_PLC_URL: plcUrl }
    const empty = tempDir()
    const none = await runCli(env, 'migrate', '--from-export', empty, '--to', dest.url)
    expect(none.code).toBe(1)
    expect(none.err).toBe(`pds migrate: ${empty} holds no complete export (manifest.json missing or not an export's manifest)\n`)

    const carol = await seed(`mis${randomBytes(3).toString('hex')}`)
    const dir = join(tempDir(), 'carol')
    expect((await runCli(origin.env, 'account', 'export', carol.handle, dir)).code).toBe(0)
    expect(existsSync(join(dir, 'manifest.json'))).toBe(true)
    const missing = await runCli(env, 'migrate', '--from-export', dir, '--to', dest.url)
    expect(missing.code).toBe(1)
    expect(missing.err).toMatch(new RegExp(`^pds migrate: no account ${carol.did} on ${dest.url} to import into .*create it there first`))
    expect(missing.err.trim().split('\n')).toHaveLength(1)
  })
})
