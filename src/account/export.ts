// "Download your data": one account's repository CAR (as sync.getRepo gives it), every blob it
// holds, its preferences, its permissioned repos (one CAR per space, as space.getRepo gives it),
// the spaces it governs (policies and member lists) and a manifest, written to a sink: files in a directory (the operator's
// `pds account export`) or entries of a tar stream (the account page's download). Blobs and the
// CAR are streamed, never held whole; the manifest goes last, so an export that has one is whole.
import { once } from 'node:events'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Readable, type Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Header, Pack, ReadEntry } from 'tar'
import type { Db } from '../db/index.js'
import type { BlobStore } from '../blob/blobstore.js'
import { repoCar } from '../repo/repo-car.js'
import { findRepoAccount } from '../repo/read.js'
import { xrpcError } from '../errors.js'
import { getPreferences } from './preferences.js'
import { getSpaceRepoCar, listSpacesOf } from '../space/repo-read.js'

export const EXPORT_FORMAT = 'atproto-account-export'
export const EXPORT_VERSION = 1
export const REPO_FILE = 'repo.car'
export const PREFERENCES_FILE = 'preferences.json'
export const MANIFEST_FILE = 'manifest.json'
export const BLOB_DIR = 'blobs'
export const SPACE_DIR = 'spaces'

export type ExportedBlob = { cid: string; size: number; mimeType: string }

/**
 * What an account keeps in Spaces. No server can import a permissioned repo yet, so an export
 * (and a move) carries them as files; `blobs` are the CIDs its records reference, whose bytes are
 * among the export's blobs. A governed space's policies and members are enough to create it
 * again elsewhere (simplespace createSpace and addMember).
 */
export type ExportedSpaces = {
  repos: { space: string; file: string; rev: string; records: number; blobs: string[] }[]
  governed: {
    space: string
    type: string
    skey: string
    policy: { $type: string; managingApp?: string }
    appAccess: { $type: string; allowed?: string[] }
    members: string[]
  }[]
}

export type ExportManifest = {
  format: typeof EXPORT_FORMAT
  version: number
  did: string
  handle: string
  exportedAt: string
  repo: { file: string; commit: string; rev: string; bytes: number }
  preferences: { file: string }
  blobs: ExportedBlob[]
  spaces: ExportedSpaces
  counts: { records: number; blobs: number; blobBytes: number; preferences: number }
  /** blobs the account holds whose bytes the store no longer has */
  missingBlobs?: string[]
}

/** where an export's files go; `size` is known for everything but the CAR */
export interface ExportSink {
  /** writes one file (name relative to the export's root); resolves with its length */
  file(name: string, body: Readable | Uint8Array, size?: number): Promise<number>
}

// blob rows read per query: the list of CIDs is kept for the manifest, their bytes are not
const BLOB_PAGE = 500

/**
 * An export begun: the account's status was checked and the repository's snapshot is open (a
 * refusal is an XRPC error thrown by `beginExport`, before anything is written). `writeTo` writes
 * everything once; `cancel` lets the snapshot go when nothing will be written.
 */
export type AccountExport = {
  did: string
  handle: string
  writeTo(sink: ExportSink): Promise<ExportManifest>
  cancel(): Promise<void>
}

/** an active or deactivated account's export; taken-down, deleted and unknown accounts are refused as getRepo refuses them */
export async function beginExport(deps: { db: Db; blobstore: BlobStore }, did: string, now = () => new Date()): Promise<AccountExport> {
  const { db, blobstore } = deps
  const account = await findRepoAccount(db, did)
  if (!account || account.status === 'deleted') throw xrpcError('RepoNotFound', `Could not find repo for DID: ${did}`)
  const car = await repoCar(db, account.did, { allowDeactivated: true })
  let used = false
  return {
    did: account.did,
    handle: account.handle,
    cancel: async () => {
      if (!used) car.stream.destroy()
      used = true
    },
    async writeTo(sink) {
      if (used) throw new Error('an export is written once')
      used = true
      const exportedAt = now().toISOString()
      const carBytes = await sink.file(REPO_FILE, car.stream)
      const preferences = await getPreferences(db, account.did, true)
      await sink.file(PREFERENCES_FILE, Buffer.from(JSON.stringify({ preferences }, null, 2) + '\n'))
      const blobs: ExportedBlob[] = []
      const missing: string[] = []
      let blobBytes = 0
      for (let cursor = ''; ;) {
        const rows = await db
          .selectFrom('blob')
          .select(['cid', 'mime_type', 'size'])
          .where('did', '=', account.did)
          .where('takedown_ref', 'is', null)
          .where('cid', '>', cursor)
          .orderBy('cid')
          .limit(BLOB_PAGE)
          .execute()
        for (const row of rows) {
          const found = await blobstore.read(row.cid)
          if (!found) {
            missing.push(row.cid)
            continue
          }
          const size = await sink.file(`${BLOB_DIR}/${row.cid}`, found.stream, found.size)
          blobs.push({ cid: row.cid, size, mimeType: row.mime_type })
          blobBytes += size
        }
        if (rows.length < BLOB_PAGE) break
        cursor = rows[rows.length - 1].cid
      }
      const spaces = await writeSpaces(db, account.did, sink)
      const manifest: ExportManifest = {
        format: EXPORT_FORMAT,
        version: EXPORT_VERSION,
        did: account.did,
        handle: account.handle,
        exportedAt,
        repo: { file: REPO_FILE, commit: car.root.cid, rev: car.root.rev, bytes: carBytes },
        preferences: { file: PREFERENCES_FILE },
        blobs,
        spaces,
        counts: { records: Number(car.root.record_count), blobs: blobs.length, blobBytes, preferences: preferences.length },
        ...(missing.length ? { missingBlobs: missing } : {}),
      }
      await sink.file(MANIFEST_FILE, Buffer.from(JSON.stringify(manifest, null, 2) + '\n'))
      return manifest
    },
  }
}

// listSpaces pages and member lists are read this many rows at a time
const SPACE_PAGE = 100

/** the account's permissioned repos as `spaces/<n>.car`, and the spaces it governs */
async function writeSpaces(db: Db, did: string, sink: ExportSink): Promise<ExportedSpaces> {
  const out: ExportedSpaces = { repos: [], governed: [] }
  for (let cursor: string | undefined; ;) {
    const page = await listSpacesOf(db, did, { limit: SPACE_PAGE, cursor })
    for (const { uri } of page.spaces) {
      const repo = await db.selectFrom('space_repo').select('rev').where('space', '=', uri).where('did', '=', did).executeTakeFirst()
      if (repo) {
        const file = `${SPACE_DIR}/${String(out.repos.length + 1).padStart(4, '0')}.car`
        const car = await getSpaceRepoCar({ db }, { space: uri, repo: did }, { did })
        const bytes = Buffer.concat(await car.body.toArray())
        await sink.file(file, bytes)
        const records = await db
          .selectFrom('space_record')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('space', '=', uri)
          .where('did', '=', did)
          .executeTakeFirstOrThrow()
        const blobs = await db
          .selectFrom('space_record_blob')
          .select('blob_cid')
          .distinct()
          .where('space', '=', uri)
          .where('did', '=', did)
          .orderBy('blob_cid')
          .execute()
        out.repos.push({ space: uri, file, rev: repo.rev, records: Number(records.n), blobs: blobs.map((b) => b.blob_cid) })
      }
      const config = await db
        .selectFrom('space_config')
        .select(['type', 'policy', 'app_access'])
        .where('space', '=', uri)
        .where('authority', '=', did)
        .where('deleted_at', 'is', null)
        .executeTakeFirst()
      if (config) {
        const members = await db.selectFrom('space_member').select('did').where('space', '=', uri).orderBy('did').execute()
        out.governed.push({
          space: uri,
          type: config.type,
          skey: uri.slice(uri.lastIndexOf('/') + 1),
          policy: JSON.parse(config.policy),
          appAccess: JSON.parse(config.app_access),
          members: members.map((m) => m.did),
        })
      }
    }
    if (!page.cursor) break
    cursor = page.cursor
  }
  return out
}

/** an export's files under `dir` (which must exist) */
export function directorySink(dir: string): ExportSink {
  return {
    async file(name, body, size) {
      const path = join(dir, name)
      await mkdir(dirname(path), { recursive: true })
      const out = createWriteStream(path, { flags: 'wx', mode: 0o600 })
      const counted = counter()
      await pipeline(toStream(body), counted.through, out)
      checkSize(name, counted.bytes(), size)
      return counted.bytes()
    },
  }
}

/**
 * An export as a tar stream: every file under `root/`. A tar entry states its size first, so the
 * CAR (whose size is known only once written) is spooled to a temporary file, not to memory.
 */
export function tarSink(root: string, spoolDir = tmpdir()): { sink: ExportSink; stream: NodeJS.ReadableStream; end(): void } {
  const pack = new Pack({ portable: true })
  const mtime = new Date()
  async function entry(name: string, body: Readable | Uint8Array, size: number): Promise<number> {
    const read = new ReadEntry(new Header({ path: `${root}/${name}`, size, type: 'File', mode: 0o644, mtime }))
    const ended = once(read, 'end')
    pack.add(read)
    let n = 0
    for await (const chunk of toStream(body) as AsyncIterable<Buffer>) {
      n += chunk.length
      if (n > size) break
      if (!read.write(chunk)) await once(read, 'drain')
    }
    checkSize(name, n, size)
    read.end()
    await ended
    return n
  }
  const sink: ExportSink = {
    async file(name, body, size) {
      if (size !== undefined) return entry(name, body, size)
      if (body instanceof Uint8Array) return entry(name, body, body.length)
      const dir = await mkdtemp(join(spoolDir, 'pds-export-'))
      try {
        const spool = join(dir, 'spool')
        await pipeline(body, createWriteStream(spool, { mode: 0o600 }))
        const { size: spooled } = await stat(spool)
        return await entry(name, createReadStream(spool), spooled)
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    },
  }
  return { sink, stream: pack as unknown as NodeJS.ReadableStream, end: () => pack.end() }
}

/** writes a whole export as a tar to `out`; a failure midway cuts `out` (a truncated archive shows as one) */
export async function writeTar(exp: AccountExport, root: string, out: Writable, spoolDir?: string): Promise<ExportManifest> {
  const tar = tarSink(root, spoolDir)
  const piped = pipeline(tar.stream, out)
  try {
    const manifest = await exp.writeTo(tar.sink)
    tar.end()
    await piped
    return manifest
  } catch (err) {
    out.destroy(err as Error)
    await piped.catch(() => {})
    throw err
  }
}

/** the name a person's download gets: the handle and the day */
export const exportName = (handle: string, at = new Date()) => `${handle}-${at.toISOString().slice(0, 10)}`

function toStream(body: Readable | Uint8Array): Readable {
  return body instanceof Uint8Array ? Readable.from([Buffer.from(body.buffer, body.byteOffset, body.byteLength)]) : body
}

function counter() {
  let n = 0
  async function* through(source: AsyncIterable<Buffer>) {
    for await (const chunk of source) {
      n += chunk.length
      yield chunk
    }
  }
  return { through, bytes: () => n }
}

// a blob whose stored length changed under the export would otherwise make a corrupt archive
function checkSize(name: string, got: number, expected: number | undefined) {
  if (expected !== undefined && got !== expected) throw new Error(`export: ${name} has ${got} bytes, expected ${expected}`)
}
