// Copies the SQLite write-ahead log back into the database file on a worker thread of its own.
// SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, on the calling
// thread: with better-sqlite3 that is the event loop, which then waits for thousands of page writes
// scattered over a large file and two fsyncs, and so does every request in flight (a write at a
// million records waited 30-60 ms for it). Here the writer's connection never checkpoints; once the
// log holds CHECKPOINT.thresholdFrames frames not yet copied (SQLite's own default threshold), the
// worker's connection runs a PASSIVE checkpoint CHECKPOINT.delayMs later, which never blocks the
// writer (and pages rewritten meanwhile are copied once). The log starts over (at the writer's next transaction) only
// once all of it is copied, which a checkpoint that writers kept appending to never achieves: the
// frames they added meanwhile are then copied in a second pass with new write transactions held
// back (reads go on; it copies only what arrived during the first). Durability does not depend on
// any of it: an acknowledged write is in the fsynced log already.
//
// How many frames wait is read from the wal-index header in the `-shm` file (its documented
// layout: mxFrame at byte 16, nBackfill at byte 96, in the machine's byte order), one pread per
// commit. The thread costs 16-18 MiB: it starts when a checkpoint is due and ends after a minute
// without one, so a quiet server does not hold it.
import { closeSync, openSync, readSync } from 'node:fs'
import { createRequire } from 'node:module'
import { endianness } from 'node:os'
import { Worker } from 'node:worker_threads'
import { CHECKPOINT, SQLITE } from '../limits.js'

// plain JavaScript run by the worker (eval): it needs only better-sqlite3, resolved by the parent
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file)
db.pragma('busy_timeout = ${SQLITE.busyTimeoutMs}')
db.pragma('cache_size = -${SQLITE.checkpointCacheKiB}')
parentPort.on('message', (m) => {
  if (m === 'close') {
    db.close()
    parentPort.close()
    return
  }
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)')
    parentPort.postMessage({ log: r.log, checkpointed: r.checkpointed })
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message || err) })
  }
})
`

export type CheckpointResult = { log: number; checkpointed: number }
const NONE: CheckpointResult = { log: -1, checkpointed: -1 }

export class Checkpointer {
  private worker: Worker | undefined
  private timer: NodeJS.Timeout | undefined
  private idleTimer: NodeJS.Timeout | undefined
  private inFlight: ((r: CheckpointResult) => void)[] | undefined
  private cycling = false
  private failed = false
  private closed = false
  private shmFd: number | undefined
  private readonly header = Buffer.alloc(100)
  private readonly littleEndian = endianness() === 'LE'

  /**
   * `fallback` runs once if the worker cannot checkpoint (it could not start, or a checkpoint
   * failed): the writer's connection then checkpoints by itself again
   */
  constructor(
    private file: string,
    private fallback: (err: Error) => void,
    private opts: {
      thresholdFrames?: number
      delayMs?: number
      idleCloseMs?: number
      /** holds back new write transactions until the returned function is called */
      holdWriters?: () => Promise<() => void>
    } = {},
  ) {}

  /** the worker thread is up */
  get running(): boolean {
    return this.worker !== undefined
  }

  /** a write transaction committed: when the log is long enough, a checkpoint follows */
  committed() {
    if (this.timer || this.cycling || this.failed || this.closed) return
    if (this.pendingFrames() < (this.opts.thresholdFrames ?? CHECKPOINT.thresholdFrames)) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.cycle()
    }, this.opts.delayMs ?? CHECKPOINT.delayMs)
    this.timer.unref()
  }

  /** a checkpoint beside the writers, then, if they appended meanwhile, one with them held */
  private async cycle() {
    this.cycling = true
    try {
      // its answer counts the frames there were when it started: those appended since are pending
      const first = await this.checkpoint()
      if (first.log < 0 || this.pendingFrames() === 0 || !this.opts.holdWriters || this.closed) return
      const release = await this.opts.holdWriters()
      try {
        await this.checkpoint()
      } finally {
        release()
      }
    } finally {
      this.cycling = false
    }
  }

  /** one PASSIVE checkpoint on the worker (shared with the one in flight, if any) */
  checkpoint(): Promise<CheckpointResult> {
    if (this.failed || this.closed) return Promise.resolve(NONE)
    if (this.inFlight) return new Promise((resolve) => this.inFlight!.push(resolve))
    clearTimeout(this.idleTimer)
    const waiting: ((r: CheckpointResult) => void)[] = []
    this.inFlight = waiting
    const worker = this.start()
    return new Promise<CheckpointResult>((resolve) => {
      waiting.push(resolve)
      if (worker) worker.postMessage('checkpoint')
      else this.settle(NONE)
    })
  }

  /** lets a checkpoint in flight finish, then closes the worker's connection */
  async close() {
    this.closed = true
    clearTimeout(this.timer)
    clearTimeout(this.idleTimer)
    this.timer = undefined
    await this.stop()
  }

  /**
   * closes the `-shm` file, only after every connection to the database is closed: closing any
   * descriptor of a file drops all of the process's POSIX locks on it, SQLite's included
   */
  release() {
    if (this.shmFd !== undefined) closeSync(this.shmFd)
    this.shmFd = undefined
  }

  /** frames in the log not copied to the database yet (0 while there is no log) */
  private pendingFrames(): number {
    try {
      this.shmFd ??= openSync(`${this.file}-shm`, 'r')
      if (readSync(this.shmFd, this.header, 0, 100, 0) < 100) return 0
    } catch {
      return 0
    }
    const u32 = (at: number) => (this.littleEndian ? this.header.readUInt32LE(at) : this.header.readUInt32BE(at))
    return u32(16) - u32(96)
  }

  private settle(r: CheckpointResult) {
    const waiting = this.inFlight ?? []
    this.inFlight = undefined
    for (const resolve of waiting) resolve(r)
    if (this.worker && !this.closed) {
      clearTimeout(this.idleTimer)
      this.idleTimer = setTimeout(() => void this.stop(), this.opts.idleCloseMs ?? CHECKPOINT.idleCloseMs)
      this.idleTimer.unref()
    }
  }

  /** the worker closes its connection and ends; the next checkpoint starts another */
  private async stop() {
    const worker = this.worker
    this.worker = undefined
    if (!worker) return
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    // held from here: a process closing its store waits for the worker to close its connection
    worker.ref()
    worker.postMessage('close')
    await exited
  }

  private fail(err: Error) {
    if (this.failed) return
    this.failed = true
    clearTimeout(this.timer)
    clearTimeout(this.idleTimer)
    const worker = this.worker
    this.worker = undefined
    this.settle(NONE)
    void worker?.terminate()
    this.fallback(err)
  }

  private start(): Worker | undefined {
    if (this.worker) return this.worker
    try {
      const driver = createRequire(import.meta.url).resolve('better-sqlite3')
      const worker = new Worker(WORKER, { eval: true, workerData: { file: this.file, driver } })
      worker.unref()
      worker.on('message', (m: CheckpointResult | { error: string }) => {
        if ('error' in m) this.fail(new Error(m.error))
        else this.settle(m)
      })
      worker.on('error', (err: Error) => this.fail(err))
      worker.on('exit', (code) => {
        if (this.worker === worker) this.fail(new Error(`checkpoint worker exited with code ${code}`))
      })
      this.worker = worker
      return worker
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)))
      return undefined
    }
  }
}
