// A fixed number of slots handed out in arrival order: how many firehose consumers may replay the
// log at once, so a crowd of `cursor=0` subscribers takes turns instead of starving every request.

export type Release = () => void

export class Slots {
  private waiting: { grant: (release: Release) => void }[] = []

  constructor(private free: number) {}

  /** a release function once a slot is ours, or undefined if `signal` aborts first */
  acquire(signal: AbortSignal): Promise<Release | undefined> {
    if (signal.aborted) return Promise.resolve(undefined)
    if (this.free > 0) {
      this.free--
      return Promise.resolve(this.releaser())
    }
    return new Promise((resolve) => {
      const entry = {
        grant: (release: Release) => {
          signal.removeEventListener('abort', onAbort)
          resolve(release)
        },
      }
      const onAbort = () => {
        this.waiting = this.waiting.filter((w) => w !== entry)
        resolve(undefined)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(entry)
    })
  }

  private releaser(): Release {
    let done = false
    return () => {
      if (done) return
      done = true
      const next = this.waiting.shift()
      if (next) next.grant(this.releaser())
      else this.free++
    }
  }
}
