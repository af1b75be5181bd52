// Copies the SQLite write-ahead log back into the database file on a worker thread of its own.
// SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, on the calling
// thread: with better-sqlite3 that is the event loop, which then waits for thousands of page
// writes scattered over a large file and two fsyncs, and so does every request in flight (a write
// at a million records waited 30-60 ms for it). The worker's connection runs PASSIVE checkpoints
// (they never block the writer, which commits on meanwhile); the writer's next transaction starts
// the log over once a checkpoint has copied all of it. Durability does not depend on it: an
// acknowledged write is in the fsynced log already.
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

/** at most one checkpoint a second while writes go on: a page rewritten meanwhile is copied once */
const INTERVAL_MS = 1000

// plain JavaScript run by the worker (eval): it needs only better-sqlite3, resolved by the parent
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file)
db.pragma('busy_timeout = 5000')
// its pages are read once per checkpoint: a small cache is enough
db.pragma('cache_size = -1024')
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

export class Checkpointer {
  private worker: Worker | undefined
  private timer: NodeJS.Timeout | undefined
  private inFlight: ((r: CheckpointResult) => void)[] | undefined
  private lastAt = 0
  private failed = false
  private closed = false

  /**
   * `fallback` runs once if the worker cannot checkpoint (it could not start, or a checkpoint
   * failed): the writer's connection then checkpoints by itself again
   */
  constructor(
    private file: string,
    private fallback: (err: Error) => void,
  ) {}

  /** a write transaction committed: a checkpoint follows within INTERVAL_MS */
  committed() {
    if (this.timer || this.failed || this.closed) return
    const wait = Math.max(0, this.lastAt + INTERVAL_MS - Date.now())
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.checkpoint()
    }, wait)
    this.timer.unref()
  }

  /** one PASSIVE checkpoint on the worker (shared with the one in flight, if any) */
  checkpoint(): Promise<CheckpointResult> {
    if (this.failed || this.closed) return Promise.resolve({ log: -1, checkpointed: -1 })
    if (this.inFlight) return new Promise((resolve) => this.inFlight!.push(resolve))
    this.lastAt = Date.now()
    const waiting: ((r: CheckpointResult) => void)[] = []
    this.inFlight = waiting
    const worker = this.start()
    return new Promise<CheckpointResult>((resolve) => {
      waiting.push(resolve)
      worker?.postMessage('checkpoint')
      if (!worker) this.settle({ log: -1, checkpointed: -1 })
    })
  }

  /** lets a checkpoint in flight finish, then closes the worker's connection */
  async close() {
    this.closed = true
    clearTimeout(this.timer)
    this.timer = undefined
    const worker = this.worker
    this.worker = undefined
    if (!worker) return
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    // held from here: a process closing its store waits for the worker to close its connection
    worker.ref()
    worker.postMessage('close')
    await exited
  }

  private settle(r: CheckpointResult) {
    const waiting = this.inFlight ?? []
    this.inFlight = undefined
    for (const resolve of waiting) resolve(r)
  }

  private fail(err: Error) {
    if (this.failed) return
    this.failed = true
    clearTimeout(this.timer)
    this.settle({ log: -1, checkpointed: -1 })
    const worker = this.worker
    this.worker = undefined
    void worker?.terminate()
    this.fallback(err)
  }

  // started at the first checkpoint: a server that only reads never pays for the thread
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
        if (!this.closed && this.worker === worker) this.fail(new Error(`checkpoint worker exited with code ${code}`))
      })
      this.worker = worker
      return worker
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)))
      return undefined
    }
  }
}
