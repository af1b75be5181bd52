// Handle rules for accounts hosted here: atproto handle syntax in lower case; on the service's
// domains, one label of 3 to 18 characters that is not reserved; anywhere else, a handle whose
// DNS record or well-known file names the account's DID.
import { isValidHandle, isValidTld } from '@atproto/syntax'
import type { Config } from '../config.js'
import type { Store } from '../db/schema.js'
import { xrpcError } from '../errors.js'
import type { OutboundGuard } from '../net/guard.js'
import { normalizeHandle, onServiceDomain, resolveExternalHandle } from '../identity/handle-resolver.js'

const MIN_LABEL = 3
export const MAX_LABEL = 18
// names a visitor could mistake for the operator's own voice or infrastructure
const RESERVED = new Set([
  'about',
  'abuse',
  'admin',
  'administrator',
  'api',
  'help',
  'hostmaster',
  'mail',
  'moderation',
  'moderator',
  'noreply',
  'no-reply',
  'oauth',
  'pds',
  'plc',
  'postmaster',
  'relay',
  'root',
  'security',
  'staff',
  'support',
  'sysadmin',
  'system',
  'webmaster',
  'www',
])

export type HandleDeps = { config: Pick<Config, 'handleDomains' | 'reservedHandles'>; outbound?: OutboundGuard }

/**
 * The handle normalized, its label (the part before the service domain) and that domain; throws
 * InvalidHandle / UnsupportedDomain. `reserved`: the label is kept from users (built-in names and
 * the operator's `extraReserved`).
 */
export function parseServiceHandle(input: string, domains: string[], extraReserved: string[] = []) {
  const handle = normalizeHandle(input)
  if (!isValidHandle(handle)) throw xrpcError('InvalidHandle', 'Input/handle must be a valid handle')
  const domain = domains.find((d) => handle.endsWith(d))
  if (!domain) throw xrpcError('UnsupportedDomain', `Handle must end in one of: ${domains.join(', ')}`)
  const label = handle.slice(0, -domain.length)
  if (label.includes('.')) throw xrpcError('InvalidHandle', 'Handle may not contain a dot before the service domain')
  if (label.length < MIN_LABEL) throw xrpcError('InvalidHandle', 'Handle too short')
  if (label.length > MAX_LABEL) throw xrpcError('InvalidHandle', 'Handle too long')
  return { handle, label, domain, reserved: RESERVED.has(label) || extraReserved.includes(label) }
}

/**
 * The normalized handle, or InvalidHandle / UnsupportedDomain / HandleNotAvailable. Outside the
 * service domains only an existing DID (`did`) can take a handle, and only one the handle's DNS
 * record or well-known file names (`resolved`, when the caller looked it up already).
 */
export async function validateHandle(deps: HandleDeps, input: string, did?: string, resolved?: string): Promise<string> {
  const handle = normalizeHandle(input)
  if (!isValidHandle(handle)) throw xrpcError('InvalidHandle', 'Input/handle must be a valid handle')
  const { handleDomains: domains, reservedHandles } = deps.config
  if (onServiceDomain(handle, domains)) {
    const parsed = parseServiceHandle(handle, domains, reservedHandles)
    if (parsed.reserved) throw xrpcError('HandleNotAvailable', 'Reserved handle')
    return parsed.handle
  }
  // a DID made here has no handle of its own to prove yet, as with the reference PDS
  if (!did || !deps.outbound) throw xrpcError('UnsupportedDomain', `Handle must end in one of: ${domains.join(', ')}`)
  if (!isValidTld(handle)) throw xrpcError('InvalidHandle', 'Handle TLD is invalid or disallowed')
  const found = resolved ?? (await resolveExternalHandle(deps.outbound, handle, { fresh: true }))
  if (found !== did) {
    throw xrpcError(
      'InvalidHandle',
      found
        ? `${handle} names another DID (${found}), not ${did}`
        : `${handle} does not name ${did}: publish a DNS TXT record _atproto.${handle} with did=${did} or serve it at https://${handle}/.well-known/atproto-did`,
    )
  }
  return handle
}

/** which of `handles` a live account holds (a deleted account's handle is free again) */
export async function takenHandles(db: Store, handles: string[]): Promise<Set<string>> {
  if (!handles.length) return new Set()
  const rows = await db.selectFrom('account').select('handle').where('handle', 'in', handles).where('status', '!=', 'deleted').execute()
  return new Set(rows.map((r) => r.handle))
}

/** refuses a handle a live account other than `did` holds */
export async function checkHandleFree(db: Store, did: string, handle: string): Promise<void> {
  const taken = await db
    .selectFrom('account')
    .select('did')
    .where('handle', '=', handle)
    .where('status', '!=', 'deleted')
    .executeTakeFirst()
  if (taken && taken.did !== did) throw xrpcError('HandleNotAvailable', 'Handle already taken')
}

// Deliberately simple: one @, a dotted domain, no spaces; the confirmation mail proves the rest.
const EMAIL = /^[^\s@]{1,64}@[^\s@.]+(\.[^\s@.]+)+$/

export function checkEmail(input: string): string {
  const email = input.trim().toLowerCase()
  if (email.length > 254 || !EMAIL.test(email)) throw xrpcError('InvalidRequest', 'Invalid email address')
  return email
}

/** the DID of the live account holding `handle`; undefined when none does */
export async function hostedHandleDid(db: Store, handle: string): Promise<string | undefined> {
  const row = await db.selectFrom('account').select('did').where('handle', '=', handle).where('status', '!=', 'deleted').executeTakeFirst()
  return row?.did
}
