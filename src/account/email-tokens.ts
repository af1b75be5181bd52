// Email tokens: one per (did, purpose), 160 random bits as 32 characters of RFC 4648
// base32, consumed by a conditional delete so two concurrent uses of one token succeed once.
import { randomBytes } from 'node:crypto'
import { base32 } from 'multiformats/bases/base32'
import type { EmailTokenPurpose } from '../db/index.js'
import type { Store } from '../db/schema.js'

const MINUTE = 60_000
export const TOKEN_TTL_MS: Record<EmailTokenPurpose, number> = {
  'confirm-email': 24 * 60 * MINUTE,
  'update-email': 24 * 60 * MINUTE,
  'reset-password': 60 * MINUTE,
  'delete-account': 60 * MINUTE,
  'plc-operation-signature': 15 * MINUTE,
}

/** 20 random bytes are exactly 32 base32 characters, no padding */
export const newEmailToken = () => base32.baseEncode(randomBytes(20)).toUpperCase()

/** what users type back: tolerate case and surrounding space */
export const normalizeToken = (token: string) => token.trim().toUpperCase()

/** stores a fresh token for (did, purpose), replacing any earlier one, and returns it */
export async function issueEmailToken(
  db: Store,
  did: string,
  purpose: EmailTokenPurpose,
  opts: { newEmail?: string; token?: string } = {},
): Promise<string> {
  const token = opts.token ?? newEmailToken()
  const now = Date.now()
  const values = {
    token,
    new_email: opts.newEmail ?? null,
    expires_at: new Date(now + TOKEN_TTL_MS[purpose]).toISOString(),
    created_at: new Date(now).toISOString(),
  }
  await db
    .insertInto('email_token')
    .values({ did, purpose, ...values })
    .onConflict((oc) => oc.columns(['did', 'purpose']).doUpdateSet(values))
    .execute()
  return token
}

/** removes and returns the unexpired token of (did, purpose) if it matches; undefined otherwise */
export function consumeEmailToken(db: Store, did: string, purpose: EmailTokenPurpose, token: string) {
  return db
    .deleteFrom('email_token')
    .where('did', '=', did)
    .where('purpose', '=', purpose)
    .where('token', '=', normalizeToken(token))
    .where('expires_at', '>', new Date().toISOString())
    .returningAll()
    .executeTakeFirst()
}

/** as consumeEmailToken, looked up by purpose and token alone (resetPassword) */
export function consumeEmailTokenByValue(db: Store, purpose: EmailTokenPurpose, token: string) {
  return db
    .deleteFrom('email_token')
    .where('purpose', '=', purpose)
    .where('token', '=', normalizeToken(token))
    .where('expires_at', '>', new Date().toISOString())
    .returningAll()
    .executeTakeFirst()
}
