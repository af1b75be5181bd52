// `pds backup` of a server taking writes, `pds restore` into a new data directory, and a server
// started there: nothing acknowledged before the backup is missing, every repository verifies,
// and the firehose carries on above the backup's sequence number. On PostgreSQL the database
// travels through pg_dump and psql, as the README shows, and the command moves the blobs.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { verifyRepoCar } from '@atproto/repo'
import { expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { subscribe, seqs } from './firehose-client.js'
import { bearer, describe, dialect, dropSchema, newAccount, PASSWORD, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

type Acked = { did: string; rkey: string; cid: string }

/** every entry under `root` (itself included) with its permission bits, as `ls -l` would show them */
function modes(root: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const e of ['.', ...(readdirSync(root, { recursive: true }) as string[])]) {
    const st = statSync(join(root, e))
    out[e] = `${st.isDirectory() ? 'd' : '-'}${(st.mode & 0o777).toString(8)}`
  }
  return out
}

/** directories owner-only (0700), files owner-only (0600), nothing else */
function expectPrivate(root: string) {
  const all = modes(root)
  const loose = Object.entries(all).filter(([, m]) => m !== 'd700' && m !== '-600')
  expect(loose, `${root}: every directory 0700 and every file 0600`).toEqual([])
  return Object.keys(all)
}

describe('backup and restore', () => {
  it('restores a backup taken mid-burst into a server that verifies and resumes', async () => {
    const pds = await startTestPds()
    const backupDir = join(tempDir('pds-backup-'), 'snapshot')
    let restored: TestPds | undefined
    try {
      const users = await Promise.all([0, 1, 2].map(() => newAccount(pds.url, 'bk')))
      // a blob referenced by a record, so the blobs travel too
      const bytes = new Uint8Array(4096).map((_, i) => i % 251)
      const up = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
        method: 'POST',
        headers: { ...bearer(users[0].accessJwt), 'content-type': 'application/octet-stream' },
        body: bytes,
      })
      const blob = ((await up.json()) as any).blob
      const withBlob = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: bearer(users[0].accessJwt),
        body: { repo: users[0].did, collection: 'com.example.pic', record: { $type: 'com.example.pic', img: blob } },
      })
      expect(withBlob.status).toBe(200)

      const acked: (Acked & { at: number })[] = []
      let stop = false
      let n = 0
      const writer = async (u: (typeof users)[number]) => {
        while (!stop) {
          const rkey = `r${++n}`
          const r = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
            headers: bearer(u.accessJwt),
            body: { repo: u.did, collection: 'com.example.load', rkey, record: { n } },
          })
          if (r.status === 200) acked.push({ did: u.did, rkey, cid: r.body.cid, at: Date.now() })
        }
      }
      const burst = Promise.all([...users, ...users].map(writer))
      for (let i = 0; i < 400 && acked.length < 30; i++) await new Promise((r) => setTimeout(r, 25))
      const before = acked.slice()
      const started = Date.now()
      const backedUp = await runCli(pds.env, 'backup', backupDir, '--json')
      const during = acked.length - before.length
      stop = true
      await burst
      expect(backedUp.code, backedUp.err).toBe(0)
      expect(during, 'writes went on while the backup ran').toBeGreaterThan(0)
      // signing keys and password hashes: readable by the operator's user alone, and no
      // write-ahead log or shared-memory file left beside the database
      const backedUpFiles = expectPrivate(backupDir)
      expect(backedUpFiles.filter((f) => /-(wal|shm|journal)$/.test(f))).toEqual([])

      const manifest = JSON.parse(readFileSync(join(backupDir, 'manifest.json'), 'utf8'))
      expect(Date.parse(manifest.startedAt)).toBeGreaterThanOrEqual(started - 1000)
      expect(manifest.seq).toBeGreaterThan(0)
      const paths = manifest.files.map((f: { path: string }) => f.path)
      expect(paths).toContain(`blobs/${blob.ref.$link}`)
      if (dialect === 'sqlite') expect(paths).toContain('pds.sqlite')
      for (const f of manifest.files) expect(f.sha256).toMatch(/^[0-9a-f]{64}$/)

      // a new server: its own port, data directory (and schema)
      const target = tempDir()
      rmSync(target, { recursive: true })
      const newSchema = `t_restore_${Date.now().toString(36)}`
      const extra: Record<string, string> = dialect === 'postgres' ? { PDS_DB_POSTGRES_SCHEMA: newSchema } : {}
      if (dialect === 'postgres') {
        const url = pds.env.PDS_DB_POSTGRES_URL
        const dump = execFileSync('pg_dump', ['--no-owner', '--no-privileges', '-n', pds.env.PDS_DB_POSTGRES_SCHEMA, url], {
          maxBuffer: 1 << 28,
        })
          .toString()
          .replaceAll(pds.env.PDS_DB_POSTGRES_SCHEMA, newSchema)
        const file = join(tempDir('pds-dump-'), 'dump.sql')
        writeFileSync(file, dump)
        execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-f', file, url], { stdio: 'ignore' })
      }
      const restoreEnv = { ...pds.env, ...extra, PDS_DATA_DIRECTORY: target }
      const r = await runCli(restoreEnv, 'restore', backupDir)
      expect(r.code, r.err).toBe(0)
      expect(expectPrivate(target)).toContain(join('blobs', blob.ref.$link))
      // a second restore finds the directory in use and refuses
      const again = await runCli(restoreEnv, 'restore', backupDir)
      expect([again.code, again.err.trim()]).toEqual([1, `pds: ${target} is not empty; restore into an empty data directory`])

      restored = await startTestPds(extra, { dataDir: target })
      const url = restored.url
      for (const a of before) {
        const got = await xrpc(url, 'com.atproto.repo.getRecord', { params: { repo: a.did, collection: 'com.example.load', rkey: a.rkey } })
        expect(got.status, a.rkey).toBe(200)
        expect(got.body.cid).toBe(a.cid)
      }
      const blobRes = await fetch(`${url}/xrpc/com.atproto.sync.getBlob?did=${users[0].did}&cid=${blob.ref.$link}`)
      expect(blobRes.status).toBe(200)
      expect(new Uint8Array(await blobRes.arrayBuffer())).toEqual(bytes)
      for (const u of users) {
        const car = new Uint8Array(await (await fetch(`${url}/xrpc/com.atproto.sync.getRepo?did=${u.did}`)).arrayBuffer())
        const doc = (await xrpc(url, 'com.atproto.identity.resolveDid', { params: { did: u.did } })).body.didDoc
        await verifyRepoCar(car, u.did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
      }

      // the firehose: replay from the backup's seq, then a new write numbered above everything
      const fh = await subscribe(url, manifest.seq)
      try {
        const login = await xrpc(url, 'com.atproto.server.createSession', {
          body: { identifier: users[1].did, password: PASSWORD },
        })
        const after = await xrpc(url, 'com.atproto.repo.createRecord', {
          headers: bearer(login.body.accessJwt),
          body: { repo: users[1].did, collection: 'com.example.load', rkey: 'after-restore', record: { n: -1 } },
        })
        expect(after.status).toBe(200)
        const frames = await fh.until((f) => f.some((x) => x.body?.ops?.some((o: { path: string }) => o.path.endsWith('after-restore'))))
        const got = seqs(frames)
        expect(got.every((s) => s > manifest.seq)).toBe(true)
        expect(new Set(got).size).toBe(got.length)
        expect(got).toEqual([...got].sort((a, b) => a - b))
      } finally {
        fh.close()
      }
    } finally {
      await restored?.stop()
      await pds.stop()
      rmSync(join(backupDir, '..'), { recursive: true, force: true })
    }
  }, 180_000)

  it('refuses a damaged backup and a non-empty backup directory', async () => {
    const pds = await startTestPds()
    const dir = join(tempDir('pds-backup-'), 'snapshot')
    try {
      const u = await newAccount(pds.url, 'bkd')
      const up = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
        method: 'POST',
        headers: { ...bearer(u.accessJwt), 'content-type': 'application/octet-stream' },
        body: new Uint8Array(100).fill(7),
      })
      expect(up.status).toBe(200)
      expect((await runCli(pds.env, 'backup', dir)).code).toBe(0)
      const full = await runCli(pds.env, 'backup', dir)
      expect([full.code, full.err.trim()]).toEqual([1, `pds: ${dir} is not empty; back up into a new directory`])
      const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'))
      const victim = manifest.files[0].path
      writeFileSync(join(dir, victim), 'not what was backed up')
      const target = join(tempDir(), 'data')
      const env = { ...pds.env, PDS_DATA_DIRECTORY: target, PDS_DB_POSTGRES_SCHEMA: pds.env.PDS_DB_POSTGRES_SCHEMA ? 't_never_used' : '' }
      const r = await runCli(env, 'restore', dir)
      expect([r.code, r.err.trim()]).toEqual([1, `pds: ${victim} does not match its checksum; the backup is damaged`])
      expect(existsSync(target)).toBe(false)
    } finally {
      await pds.stop()
      await dropSchema({ PDS_DB_POSTGRES_URL: pds.env.PDS_DB_POSTGRES_URL ?? '', PDS_DB_POSTGRES_SCHEMA: 't_never_used' })
      rmSync(join(dir, '..'), { recursive: true, force: true })
    }
  }, 60_000)
})
