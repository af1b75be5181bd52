import { pino, type Logger } from 'pino'

export type { Logger }

// Tokens, passwords and email bodies never reach the log: request logs carry no headers or
// bodies, and these paths are redacted wherever an object is logged whole.
const redact = [
  'password',
  '*.password',
  'token',
  '*.token',
  'accessJwt',
  'refreshJwt',
  '*.accessJwt',
  '*.refreshJwt',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers.dpop',
]

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: redact, censor: '[redacted]' }, base: { name: 'pds' } })
}
