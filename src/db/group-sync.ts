// Group commit: a change is acknowledged only once an fsync that started after it has completed.
// Changes that land while one fsync is in flight share the next one, so concurrent writers pay
// for one fsync between them instead of one each. Subclasses say what to sync.
type Waiter = { resolve: () => void; reject: (err: unknown) => void }

export abstract class GroupSync {
  /** changes counted so far; a change's ticket is the count including it */
  private changed = 0
  /** every change with a ticket up to this one is on disk */
  private synced = 0
  /** changes that landed since the fsync in flight started: they wait for the next one */
  private waiters: Waiter[] = []
  /** waiting for the fsync in flight, which covers every ticket up to `batchThrough` */
  private batch: Waiter[] | undefined
  private batchThrough = 0
  protected running: Promise<void> | undefined

  constructor(private onSync: () => void = () => {}) {}

  /** one fsync of whatever this instance guards; a failure rejects the batch it was for */
  protected abstract sync(): Promise<void>

  /** a change just landed: resolves once it is on disk */
  commit(): Promise<void> {
    return this.through(++this.changed)
  }

  /** resolves once every change made so far is on disk (for readers that pass data on) */
  durable(): Promise<void> {
    return this.through(this.changed)
  }

  private through(ticket: number): Promise<void> {
    if (ticket <= this.synced) return Promise.resolve()
    return new Promise((resolve, reject) => {
      // a reader's ticket may be covered by the fsync in flight; a fresh change's never is
      if (this.batch && ticket <= this.batchThrough) this.batch.push({ resolve, reject })
      else this.waiters.push({ resolve, reject })
      this.running ??= this.drain()
    })
  }

  private async drain() {
    try {
      while (this.waiters.length) {
        // everyone waiting now changed before this fsync starts; later arrivals wait for the next
        const batch = (this.batch = this.waiters.splice(0))
        const through = (this.batchThrough = this.changed)
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
      // cleared in the same step that saw no waiters: a change arriving next starts a new drain
      this.running = undefined
    }
  }
}
