// In-process delivery of this process's own events: each event appended is handed to the
// firehose as soon as its transaction has committed (on SQLite, once its fsync is done: what the
// writer's answer waits for too), instead of waiting for the next read of the log. The log stays
// the source of truth: the firehose takes a handed event only when it directly follows the last
// one it sent, and reads the log otherwise.
import type { LocalEvent } from '../db/store.js'

export type { LocalEvent }
