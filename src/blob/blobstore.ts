// Blob bytes behind a small interface (the disk store here, an S3 bucket in blobstore-s3.ts). The
// disk store streams an upload to a temporary file while hashing it, then links it atomically to a
// content-addressed path, so a reader never sees a partial blob.
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { link, mkdir, open, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'
import { xrpcError } from '../errors.js'
import { GroupSync } from '../db/group-sync.js'

const RAW = 0x55
const SHA256 = 0x12
const WRITE_BYTES = 1024 * 1024

export type StagedBlob = { key: string; cid: string; size: number }

/** an upload's bytes as they stream past: held to `limit`, hashed into the blob's raw CID */
export class UploadMeter {
  private hash = createHash('sha256')
  private size = 0
  constructor(private limit: number) {}
  take(chunk: Uint8Array) {
    this.size += chunk.length
    if (this.size > this.limit) throw xrpcError('PayloadTooLarge', `Blob is larger than ${this.limit} bytes`)
    this.hash.update(chunk)
  }
  result(): { cid: string; size: number } {
    return { cid: CID.createV1(RAW, Digest.create(SHA256, this.hash.digest())).toString(), size: this.size }
  }
}

export interface BlobStore {
  /** streams `input` to temporary storage, refusing more than `limit` bytes (413) */
  stage(input: AsyncIterable<Uint8Array>, limit: number): Promise<StagedBlob>
  /**
   * copies a staged blob to its permanent content-addressed place (idempotent per CID); the staged
   * copy stays until `discard`, so a commit can be repeated if the sweeper removed the bytes meanwhile
   */
  commit(staged: StagedBlob): Promise<void>
  /** removes the staged copy (after a commit too) */
  discard(staged: StagedBlob): Promise<void>
  has(cid: string): Promise<boolean>
  /** null when the bytes are not stored */
  read(cid: string): Promise<{ stream: Readable; size: number } | null>
  delete(cid: string): Promise<void>
  /** removes staged copies older than `before` (left by a crash mid-upload); returns how many */
  sweepStaged(before: Date): Promise<number>
}

// a rename survives a crash only once its directory is synced; renames that land while one such
// sync runs share the next
class DirSync extends GroupSync {
  constructor(private dir: string) {
    super()
  }

  protected async sync() {
    const fh = await open(this.dir, 'r')
    try {
      await fh.sync()
    } finally {
      await fh.close()
    }
  }
}

export class DiskBlobStore implements BlobStore {
  private tmp: string
  private dirSync: DirSync

  constructor(private dir: string) {
    this.tmp = join(dir, 'tmp')
    this.dirSync = new DirSync(dir)
  }

  private path(cid: string) {
    // CIDs are base32 lowercase: safe as file names; refuse anything else before touching disk
    if (!/^[a-z2-7]+$/.test(cid)) throw xrpcError('InvalidRequest', 'Invalid blob CID')
    return join(this.dir, cid)
  }

  // created once per store rather than on every upload (and again if someone removed them)
  private dirsReady?: Promise<unknown>
  private ensureDirs() {
    // owner-only, as the files in them (an upload's bytes are not public until it is referenced)
    this.dirsReady ??= mkdir(this.tmp, { recursive: true, mode: 0o700 }).catch((err) => {
      this.dirsReady = undefined
      throw err
    })
    return this.dirsReady
  }

  async stage(input: AsyncIterable<Uint8Array>, limit: number): Promise<StagedBlob> {
    await this.ensureDirs()
    const key = randomBytes(16).toString('hex')
    const file = join(this.tmp, key)
    const fh = await open(file, 'wx', 0o600).catch(async (err) => {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
      this.dirsReady = undefined
      await this.ensureDirs()
      return open(file, 'wx', 0o600)
    })
    const meter = new UploadMeter(limit)
    // socket chunks are small: gather them into fewer writes, each one writev of the chunks as
    // received (copying them into one buffer cost more than the write itself)
    let pending: Uint8Array[] = []
    let pendingBytes = 0
    const flush = async () => {
      if (pendingBytes === 0) return
      const bufs = pending
      const bytes = pendingBytes
      pending = []
      pendingBytes = 0
      const { bytesWritten } = await fh.writev(bufs)
      if (bytesWritten !== bytes) throw new Error(`short write to ${file}: ${bytesWritten} of ${bytes} bytes`)
    }
    try {
      for await (const chunk of input) {
        meter.take(chunk)
        pending.push(chunk)
        pendingBytes += chunk.length
        if (pendingBytes >= WRITE_BYTES) await flush()
      }
      await flush()
      // the bytes reach the disk before the rename makes them visible
      await fh.sync()
      await fh.close()
    } catch (err) {
      await fh.close().catch(() => {})
      await rm(file, { force: true })
      throw err
    }
    return { key, ...meter.result() }
  }

  async commit(staged: StagedBlob): Promise<void> {
    // same bytes, same name: an existing file is as good as a new one
    await link(join(this.tmp, staged.key), this.path(staged.cid)).catch((err) => {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    })
    // the upload is acknowledged after this: its name must be on disk too, not only its bytes
    await this.dirSync.commit()
  }

  async discard(staged: StagedBlob): Promise<void> {
    await rm(join(this.tmp, staged.key), { force: true })
  }

  async has(cid: string): Promise<boolean> {
    try {
      await stat(this.path(cid))
      return true
    } catch {
      return false
    }
  }

  async read(cid: string) {
    try {
      const s = await stat(this.path(cid))
      return { stream: createReadStream(this.path(cid)), size: s.size }
    } catch {
      return null
    }
  }

  async delete(cid: string): Promise<void> {
    await rm(this.path(cid), { force: true })
  }

  async sweepStaged(before: Date): Promise<number> {
    const names = await readdir(this.tmp).catch(() => [] as string[])
    let removed = 0
    for (const name of names) {
      const file = join(this.tmp, name)
      const s = await stat(file).catch(() => null)
      if (!s || s.mtimeMs >= before.getTime()) continue
      await rm(file, { force: true })
      removed++
    }
    return removed
  }
}
