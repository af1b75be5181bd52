// The disk filling up under a running server: its data directory is on a small tmpfs this suite
// mounts (root only, as on CI; without the right to mount it reports skipped), filled to the last
// page by a file that is then removed. A write refused for want of space answers 503
// InsufficientStorage, leaves no trace (root, records, blocks, firehose, blob rows and bytes),
// and the same writes go through once space is back.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { closeSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { verifyRepoCar } from '@atproto/repo'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { subscribe, type Frame } from './firehose-client.js'
import { dialect, describe, newAccount, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

const COLLECTION = 'com.example.diskfull'

function mount(dir: string) {
  return spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=32m,mode=0700', 'tmpfs', dir]).status === 0
}
function unmount(dir: string) {
  spawnSync('umount', ['-l', dir])
  rmSync(dir, { recursive: true, force: true })
}

// whether this process may mount a tmpfs (root, or CAP_SYS_ADMIN): tried once, at load
const canMount = (() => {
  const probe = tempDir('pds-tmpfs-probe-')
  const ok = mount(probe)
  if (ok) unmount(probe)
  else rmSync(probe, { recursive: true, force: true })
  return ok
})()
const d = canMount ? describe : describe.skip

/** fills the file system holding `dir` to its last page; removing the returned file frees it */
function fill(dir: string): string {
  const file = join(dir, 'filler')
  const fd = openSync(file, 'w')
  try {
    for (const size of [1024 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size, 1)
      for (let i = 0; i < 1_000_000; i++) {
        try {
          writeSync(fd, chunk)
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break
          throw err
        }
      }
    }
  } finally {
    closeSync(fd)
  }
  return file
}

d('disk full', () => {
  let mnt: string
  let pds: TestPds
  let acct: Awaited<ReturnType<typeof newAccount>>
  let auth: { authorization: string }
  const acked: string[] = []

  beforeAll(async () => {
    mnt = tempDir('pds-tmpfs-')
    if (!mount(mnt)) throw new Error(`could not mount a tmpfs on ${mnt}`)
    pds = await startTestPds({}, { dataDir: join(mnt, 'data') })
    acct = await newAccount(pds.url, 'diskfull')
    auth = { authorization: `Bearer ${acct.accessJwt}` }
  })
  afterAll(async () => {
    await pds?.stop()
    if (mnt) unmount(mnt)
  })

  const create = (rkey: string) =>
    xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: auth,
      body: { repo: acct.did, collection: COLLECTION, rkey, record: { $type: COLLECTION, rkey, pad: 'x'.repeat(2000) } },
    })
  const upload = (bytes: Buffer) =>
    fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: bytes,
    })
  const head = async () => (await xrpc(pds.url, 'com.atproto.sync.getLatestCommit', { params: { did: acct.did } })).body
  const stored = async () =>
    (
      (await xrpc(pds.url, 'com.atproto.repo.listRecords', { params: { repo: acct.did, collection: COLLECTION, limit: '100' } })).body
        .records as { uri: string }[]
    )
      .map((r) => r.uri.split('/').pop()!)
      .sort()
  const getBlob = (cid: string) => fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${acct.did}&cid=${cid}`)
  const cidOf = (bytes: Buffer) => CID.createV1(0x55, Digest.create(0x12, createHash('sha256').update(bytes).digest())).toString()
  const staged = () => {
    try {
      return readdirSync(join(pds.services.config.blobDir, 'tmp'))
    } catch {
      return []
    }
  }

  it.skipIf(dialect === 'postgres')(
    'refuses createRecord with 503 InsufficientStorage, changes nothing, and writes again once space is back',
    async () => {
      for (const rkey of ['a1', 'a2', 'a3']) {
        const r = await create(rkey)
        expect(r.status, r.text).toBe(200)
        acked.push(rkey)
      }
      const before = await head()
      const filler = fill(mnt)
      let refused: Awaited<ReturnType<typeof create>> | undefined
      try {
        // the log may still have room from earlier writes; it runs out within a few records
        for (let i = 0; i < 50 && !refused; i++) {
          const r = await create(`full${i}`)
          if (r.status === 200) acked.push(`full${i}`)
          else refused = r
        }
        expect(refused, 'a write refused while the disk is full').toBeDefined()
        expect([refused!.status, refused!.body?.error]).toEqual([503, 'InsufficientStorage'])
        // what reads show is what was acknowledged, nothing of the refused write
        expect(await stored()).toEqual([...acked].sort())
        if (acked.length === 3) expect(await head()).toEqual(before)
        // reads keep working while the disk is full
        expect((await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth })).status).toBe(200)
      } finally {
        rmSync(filler)
      }

      const again = await create('after')
      expect(again.status, again.text).toBe(200)
      acked.push('after')
      expect(await stored()).toEqual([...acked].sort())

      // the repository verifies and holds exactly the acknowledged records
      const car = new Uint8Array(await (await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)).arrayBuffer())
      const doc = (await xrpc(pds.url, 'com.atproto.identity.resolveDid', { params: { did: acct.did } })).body.didDoc
      const verified = await verifyRepoCar(car, acct.did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
      expect(verified.creates.map((c) => c.rkey).sort()).toEqual([...acked].sort())

      // the firehose carries one commit per acknowledged write, each following the one before
      const fh = await subscribe(pds.url, 0)
      try {
        const mine = (frames: Frame[]) => frames.filter((f) => f.t === '#commit' && f.body.repo === acct.did)
        const rev = again.body.commit.rev
        await fh.until((f) => mine(f).some((c) => c.body.rev === rev))
        const commits = mine(fh.frames)
        const written = commits.flatMap((c) => c.body.ops.map((op: { path: string }) => op.path.split('/')[1]))
        expect(written.filter((rkey: string) => rkey !== 'self').sort()).toEqual([...acked].sort())
        for (let i = 1; i < commits.length; i++) expect(commits[i].body.since).toBe(commits[i - 1].body.rev)
      } finally {
        fh.close()
      }
    },
  )

  it('refuses uploadBlob to the disk store with 503 InsufficientStorage, keeps no partial bytes, and stores it once space is back', async () => {
    const bytes = Buffer.alloc(256 * 1024, 7)
    bytes.write(`disk full ${Date.now()}`)
    const cid = cidOf(bytes)
    const filler = fill(mnt)
    try {
      const res = await upload(bytes)
      const body = (await res.json()) as { error?: string }
      expect([res.status, body.error]).toEqual([503, 'InsufficientStorage'])
      expect(staged()).toEqual([])
      expect((await getBlob(cid)).status).toBe(404)
    } finally {
      rmSync(filler)
    }
    const res = await upload(bytes)
    expect(res.status).toBe(200)
    const { blob } = (await res.json()) as { blob: { ref: { $link: string }; size: number } }
    expect([blob.ref.$link, blob.size]).toEqual([cid, bytes.length])
    const back = await getBlob(cid)
    expect(back.status).toBe(200)
    expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).toBe(true)
    expect(staged()).toEqual([])
  })
})
