// Passwords: hashing (scrypt at the reference PDS's cost, stored self-describing as
// `scrypt:<log2 N>:<r>:<p>:<salt b64>:<key b64>` so the cost can be raised later), setting an
// account's main password, and a forgotten one. Every way of setting it ends the account's access.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { endAccess } from './end-access.js'
import { noticeCredentialChange, type NoticeDeps } from './notices.js'
import type { Logger } from '../logger.js'
import type { Mailer } from '../mail/index.js'
import { resetPasswordMail } from '../mail/templates.js'
import { passwordResetAccount } from './email.js'
import { consumeEmailTokenByValue, issueEmailToken, newEmailToken } from './email-tokens.js'

const LOG_N = 14
const R = 8
const P = 1
const KEY_LEN = 64
const SALT_LEN = 16

export const MAX_PASSWORD_LENGTH = 256

// A hash runs on libuv's threadpool (4 threads), where the database's fsync runs too, and every
// acknowledged write waits for an fsync. Hashes take at most all but one of the threads at once:
// a burst of logins then makes logins wait for each other, never a write for a hash (tens of
// milliseconds each, more on a busy machine). With two cores, three at once hash as fast as four.
const HASHES_AT_ONCE = 3
let hashing = 0
const waiting: (() => void)[] = []

async function scrypt(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN
  const opts: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }
  if (hashing >= HASHES_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve))
  else hashing++
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scryptCb(password.normalize('NFKC'), salt, KEY_LEN, opts, (err, key) => (err ? reject(err) : resolve(key))),
    )
  } finally {
    // the slot passes straight to the next in line, or is given back
    const next = waiting.shift()
    if (next) next()
    else hashing--
  }
}

export async function hashPassword(password: string, salt = randomBytes(SALT_LEN)): Promise<string> {
  const key = await scrypt(password, salt, LOG_N, R, P)
  return ['scrypt', LOG_N, R, P, salt.toString('base64'), key.toString('base64')].join(':')
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, logN, r, p, salt, key] = stored.split(':')
  if (alg !== 'scrypt' || !key) return false
  const want = Buffer.from(key, 'base64')
  const got = await scrypt(password, Buffer.from(salt, 'base64'), Number(logN), Number(r), Number(p))
  return got.length === want.length && timingSafeEqual(got, want)
}

// An unknown identifier is checked against this, so it costs as much as a wrong password.
let dummy: Promise<string> | undefined
export async function burnPasswordCheck(password: string): Promise<void> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'))
  await verifyPassword(password, await dummy)
}

// App passwords: server-generated random secrets, so they need no per-secret salt
// against guessing. Every app password of an account shares the account's salt: a login hashes
// the candidate once and compares that one result against every stored hash.
export const newAppPasswordSalt = () => randomBytes(SALT_LEN).toString('base64')

export function hashAppPassword(password: string, salt: string): Promise<string> {
  return hashPassword(password, Buffer.from(salt, 'base64'))
}

/** the index of the stored hash `password` matches, or -1; costs one scrypt whatever the count */
export async function matchAppPassword(password: string, salt: string, stored: string[]): Promise<number> {
  const candidate = (await hashAppPassword(password, salt)).split(':')
  const got = Buffer.from(candidate[5], 'base64')
  let found = -1
  stored.forEach((h, i) => {
    const parts = h.split(':')
    // a hash made at another cost (or salt) cannot match this candidate
    if (parts.slice(0, 5).join(':') !== candidate.slice(0, 5).join(':')) return
    const want = Buffer.from(parts[5], 'base64')
    if (want.length === got.length && timingSafeEqual(want, got) && found < 0) found = i
  })
  return found
}

// Setting an account's main password: by the owner (the account page, knowing the current one),
// with a reset code, or by the operator. Every way ends the account's access (endAccess): whoever
// held a session, a grant or an app password from before the change is out. The owner is told.
export const MIN_PASSWORD_LENGTH = 8

export type PasswordDeps = NoticeDeps & { db: Db }

/** a bad length is 400 InvalidPassword, refused before anything else is looked at */
export function checkPasswordLength(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at least ${MIN_PASSWORD_LENGTH} characters`)
  if (password.length > MAX_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at most ${MAX_PASSWORD_LENGTH} characters`)
}

/** sets the main password of `did` (the owner's change or the operator's) and ends its access */
export async function changePassword(deps: PasswordDeps, did: string, password: string, by: 'owner' | 'operator'): Promise<void> {
  checkPasswordLength(password)
  const hash = await hashPassword(password)
  await deps.db.transact(async (trx) => {
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', did).execute()
    await endAccess(trx, did, 'password')
  })
  await noticeCredentialChange(deps, did, { kind: 'password', by })
}

/**
 * consumes the reset-password token (found by value alone) and sets the password; a miss is 400
 * InvalidToken, and a bad length is refused before the token is looked at, so it does not burn it
 */
export async function resetPassword(deps: PasswordDeps, token: string, password: string): Promise<void> {
  checkPasswordLength(password)
  const hash = await hashPassword(password)
  const did = await deps.db.transact(async (trx) => {
    const hit = await consumeEmailTokenByValue(trx, 'reset-password', token)
    if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 400)
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', hit.did).execute()
    await endAccess(trx, hit.did, 'password')
    return hit.did
  })
  await noticeCredentialChange(deps, did, { kind: 'password', by: 'reset' })
}

// A forgotten password, for requestPasswordReset/resetPassword and the sign-in pages alike: the
// same answer and the same work whether or not the address belongs to an account (delivery
// happens in the background and a failure is only logged), and a new password ends the account's
// access (sessions, grants, app passwords; see resetPassword).
export async function requestPasswordReset(deps: { db: Db; mailer: Mailer; logger: Logger }, rawEmail: string): Promise<void> {
  const email = rawEmail.trim().toLowerCase()
  const account = await passwordResetAccount(deps.db, email)
  const token = newEmailToken()
  if (!account) return
  await issueEmailToken(deps.db, account.did, 'reset-password', { token })
  deps.mailer.send({ to: account.email, ...resetPasswordMail(token, account.handle) }).catch((err: unknown) => {
    deps.logger.warn({ reason: String((err as Error)?.message ?? err) }, 'password reset email not delivered')
  })
}
