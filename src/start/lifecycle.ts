// What was started gets stopped: each part of the start registers its own teardown as it comes
// up, and close runs them in reverse order (the last thing started, the first one stopped), so
// nothing is closed while what depends on it still runs. Every step is bounded and a failing one
// is logged, never allowed to keep the steps after it from running.
import type { Logger } from '../logger.js'
import { SHUTDOWN } from '../limits.js'

type Step = { name: string; close: () => unknown }

export class Lifecycle {
  private steps: Step[] = []
  private closing: Promise<void> | undefined

  constructor(
    private logger: Pick<Logger, 'warn'>,
    private stepMs = SHUTDOWN.stepMs,
  ) {}

  /** `close` runs at shutdown, before the teardown of anything registered earlier */
  onClose(name: string, close: () => unknown): void {
    // registered after close began (a part still starting): stop it at once rather than leak it
    if (this.closing) void this.closing.then(() => this.run({ name, close }))
    else this.steps.push({ name, close })
  }

  /** `fn` every `ms`, off the event loop's reasons to stay alive, cleared at shutdown */
  every(name: string, ms: number, fn: () => void): void {
    const timer = setInterval(fn, ms)
    timer.unref()
    this.onClose(name, () => clearInterval(timer))
  }

  /** runs every step once, newest first; later calls get the same promise */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      for (let step = this.steps.pop(); step; step = this.steps.pop()) await this.run(step)
    })())
  }

  private async run({ name, close }: Step) {
    let timer: NodeJS.Timeout | undefined
    const overdue = new Promise<'overdue'>((resolve) => (timer = setTimeout(() => resolve('overdue'), this.stepMs)))
    try {
      const outcome = await Promise.race([Promise.resolve().then(close), overdue])
      if (outcome === 'overdue') this.logger.warn({ step: name, ms: this.stepMs }, 'shutdown step did not finish in time; going on')
    } catch (err) {
      this.logger.warn({ step: name, err: String(err) }, 'shutdown step failed; going on')
    } finally {
      clearTimeout(timer)
    }
  }
}
