// Handle rules for accounts hosted here: atproto handle syntax, one of the service's suffixes, and
// the reference PDS's constraints on the label in front of it.
import { isValidHandle, normalizeHandle } from '@atproto/syntax'
import type { Store } from '../db/schema.js'
import { xrpcError } from '../errors.js'

const MIN_LABEL = 3
export const MAX_LABEL = 18
const RESERVED = new Set(['admin', 'administrator', 'root', 'support', 'help', 'www', 'api', 'pds', 'mail', 'about'])

/** returns the normalized handle or throws InvalidHandle / UnsupportedDomain / HandleNotAvailable */
export function checkServiceHandle(input: string, domains: string[]): string {
  const { handle, reserved } = parseServiceHandle(input, domains)
  if (reserved) throw xrpcError('HandleNotAvailable', 'Reserved handle')
  return handle
}

/**
 * The handle normalized, its label (the part before the service domain) and that domain; throws
 * InvalidHandle / UnsupportedDomain. `reserved`: the label is kept from users.
 */
export function parseServiceHandle(input: string, domains: string[]) {
  const handle = normalizeHandle(input.trim())
  if (!isValidHandle(handle)) throw xrpcError('InvalidHandle', 'Input/handle must be a valid handle')
  const domain = domains.find((d) => handle.endsWith(d))
  if (!domain) throw xrpcError('UnsupportedDomain', `Handle must end in one of: ${domains.join(', ')}`)
  const label = handle.slice(0, -domain.length)
  if (label.includes('.')) throw xrpcError('InvalidHandle', 'Handle may not contain a dot before the service domain')
  if (label.length < MIN_LABEL) throw xrpcError('InvalidHandle', 'Handle too short')
  if (label.length > MAX_LABEL) throw xrpcError('InvalidHandle', 'Handle too long')
  return { handle, label, domain, reserved: RESERVED.has(label) }
}

/** which of `handles` an account row holds (deleted accounts' rows too: the unique index does) */
export async function takenHandles(db: Store, handles: string[]): Promise<Set<string>> {
  if (!handles.length) return new Set()
  const rows = await db.selectFrom('account').select('handle').where('handle', 'in', handles).execute()
  return new Set(rows.map((r) => r.handle))
}

/** the normalized handle `did` may take: the service's handle rules, and not another account's */
export async function checkHandleFor(db: Store, did: string, input: string, domains: string[]): Promise<string> {
  const handle = checkServiceHandle(input, domains)
  const taken = await db.selectFrom('account').select('did').where('handle', '=', handle).executeTakeFirst()
  if (taken && taken.did !== did) throw xrpcError('HandleNotAvailable', 'Handle already taken')
  return handle
}

// Deliberately simple: one @, a dotted domain, no spaces; the confirmation mail proves the rest.
const EMAIL = /^[^\s@]{1,64}@[^\s@.]+(\.[^\s@.]+)+$/

export function checkEmail(input: string): string {
  const email = input.trim().toLowerCase()
  if (email.length > 254 || !EMAIL.test(email)) throw xrpcError('InvalidRequest', 'Invalid email address')
  return email
}
