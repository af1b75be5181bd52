// Group commit for SQLite in WAL mode with synchronous=NORMAL: COMMIT writes the WAL frames but
// does not fsync them, so a write is acknowledged only once an fsync of the WAL file that started
// after its COMMIT has completed (group-sync.ts). The fsync runs on libuv's threadpool, off the
// event loop.
import { close, fstat, fsync, open, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { promisify } from 'node:util'
import { GroupSync } from './group-sync.js'

const openP = promisify(open)
const closeP = promisify(close)
const fstatP = promisify(fstat)
const fsyncP = promisify(fsync)

export class WalSync extends GroupSync {
  private fd: number | undefined
  private ino: number | undefined
  private failed: Error | undefined

  constructor(
    private walFile: string,
    onSync: () => void = () => {},
  ) {
    super(onSync)
  }

  override commit(): Promise<void> {
    return this.failed ? Promise.reject(this.failed) : super.commit()
  }

  override durable(): Promise<void> {
    return this.failed ? Promise.reject(this.failed) : super.durable()
  }

  /** waits for the fsync in flight and any owed, then closes the file */
  async close() {
    await this.running
    if (this.fd !== undefined) await closeP(this.fd)
    this.fd = undefined
  }

  protected async sync() {
    if (this.failed) throw this.failed
    // a lookup of a cached inode: cheaper inline than a round trip through the threadpool
    const { ino } = statSync(this.walFile)
    if (ino !== this.ino) await this.reopen()
    try {
      await fsyncP(this.fd!)
    } catch (err) {
      // the kernel may have dropped the pages that failed to write, and a later fsync can then
      // succeed without them: no later write is acknowledged either (restart to recover)
      this.failed = err instanceof Error ? err : new Error(String(err))
      throw err
    }
  }

  // the WAL appears with the first write and is replaced only if the database is reopened; a new
  // file's directory entry is durable only once the directory is synced
  private async reopen() {
    if (this.fd !== undefined) await closeP(this.fd)
    this.fd = this.ino = undefined
    const fd = await openP(this.walFile, 'r')
    try {
      const { ino } = await fstatP(fd)
      const dir = await openP(dirname(this.walFile), 'r')
      try {
        await fsyncP(dir)
      } finally {
        await closeP(dir)
      }
      this.fd = fd
      this.ino = ino
    } catch (err) {
      await closeP(fd)
      throw err
    }
  }
}
