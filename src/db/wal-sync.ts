// Group commit for SQLite in WAL mode with synchronous=NORMAL: COMMIT writes the WAL frames but
// does not fsync them, so a write is acknowledged only once an fsync of the WAL file that started
// after its COMMIT has completed. The fsync runs on libuv's threadpool, off the event loop, and
// every commit that lands while one is in flight shares the next one.
import { close, fstat, fsync, open, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { promisify } from 'node:util'

const openP = promisify(open)
const closeP = promisify(close)
const fstatP = promisify(fstat)
const fsyncP = promisify(fsync)

type Waiter = { resolve: () => void; reject: (err: unknown) => void }

export class WalSync {
  /** commits counted so far; a commit's ticket is the count including it */
  private committed = 0
  /** every commit with a ticket up to this one is on disk */
  private synced = 0
  /** commits that landed since the fsync in flight started: they wait for the next one */
  private waiters: Waiter[] = []
  /** waiting for the fsync in flight, which covers every ticket up to `batchThrough` */
  private batch: Waiter[] | undefined
  private batchThrough = 0
  private running: Promise<void> | undefined
  private fd: number | undefined
  private ino: number | undefined
  private failed: unknown

  constructor(
    private walFile: string,
    private onSync: () => void = () => {},
  ) {}

  /** a transaction just committed: resolves once it is on disk */
  commit(): Promise<void> {
    return this.through(++this.committed)
  }

  /** resolves once every transaction committed so far is on disk (for readers that pass data on) */
  durable(): Promise<void> {
    return this.through(this.committed)
  }

  /** waits for the fsync in flight and any owed, then closes the file */
  async close() {
    await this.running
    if (this.fd !== undefined) await closeP(this.fd)
    this.fd = undefined
  }

  private through(ticket: number): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    if (ticket <= this.synced) return Promise.resolve()
    return new Promise((resolve, reject) => {
      // a reader's ticket may be covered by the fsync in flight; a fresh commit's never is
      if (this.batch && ticket <= this.batchThrough) this.batch.push({ resolve, reject })
      else this.waiters.push({ resolve, reject })
      this.running ??= this.drain()
    })
  }

  private async drain() {
    try {
      while (this.waiters.length) {
        // everyone waiting now committed before this fsync starts; later arrivals wait for the next
        const batch = (this.batch = this.waiters.splice(0))
        const through = (this.batchThrough = this.committed)
        try {
          await this.sync()
          this.synced = through
          this.onSync()
          for (const w of batch) w.resolve()
        } catch (err) {
          for (const w of batch) w.reject(err)
        }
        this.batch = undefined
      }
    } finally {
      // cleared in the same step that saw no waiters: a commit arriving next starts a new drain
      this.running = undefined
    }
  }

  private async sync() {
    if (this.failed) throw this.failed
    // a lookup of a cached inode: cheaper inline than a round trip through the threadpool
    const { ino } = statSync(this.walFile)
    if (ino !== this.ino) await this.reopen()
    try {
      await fsyncP(this.fd!)
    } catch (err) {
      // the kernel may have dropped the pages that failed to write, and a later fsync can then
      // succeed without them: no later write is acknowledged either (restart to recover)
      this.failed = err
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
