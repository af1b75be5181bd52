// Handle rules for accounts hosted here: atproto handle syntax, one of the service's suffixes, and
// the reference PDS's constraints on the label in front of it.
import { isValidHandle, normalizeHandle } from '@atproto/syntax'
import { xrpcError } from '../errors.js'
import type { Store } from '../db/schema.js'

const RESERVED = new Set(['admin', 'administrator', 'root', 'support', 'help', 'www', 'api', 'pds', 'mail', 'about'])

/** returns the normalized handle or throws InvalidHandle / UnsupportedDomain */
export function checkServiceHandle(input: string, domains: string[]): string {
  const handle = normalizeHandle(input.trim())
  if (!isValidHandle(handle)) throw xrpcError('InvalidHandle', 'Input/handle must be a valid handle')
  const suffix = domains.find((d) => handle.endsWith(d))
  if (!suffix) throw xrpcError('UnsupportedDomain', `Handle must end in one of: ${domains.join(', ')}`)
  const front = handle.slice(0, -suffix.length)
  if (front.includes('.')) throw xrpcError('InvalidHandle', 'Handle may not contain a dot before the service domain')
  if (front.length < 3) throw xrpcError('InvalidHandle', 'Handle too short')
  if (front.length > 18) throw xrpcError('InvalidHandle', 'Handle too long')
  if (RESERVED.has(front)) throw xrpcError('HandleNotAvailable', 'Reserved handle')
  return handle
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
