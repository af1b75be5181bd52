// Recovery codes: one-time codes that stand in for an authenticator app or passkey that is lost.
// Shown once when made; only their keyed hashes are kept.
import type { Config } from '../../config.js'
import type { Store } from '../../db/schema.js'
import { codeHash, newCode, normalizeCode, sameHash } from './sealing.js'

export const RECOVERY_CODE_COUNT = 10

/** a fresh set for `did`, replacing every earlier one; the codes to show the user, once */
export async function issueRecoveryCodes(db: Store, config: Pick<Config, 'secrets'>, did: string): Promise<string[]> {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newCode)
  const now = new Date().toISOString()
  await db.deleteFrom('recovery_code').where('did', '=', did).execute()
  await db
    .insertInto('recovery_code')
    .values(codes.map((c) => ({ did, code_hash: codeHash(config, did, c), used_at: null, created_at: now })))
    .execute()
  return codes
}

/** spends one unused code of `did`; true when it was one (each code works once, also when raced) */
export async function useRecoveryCode(db: Store, config: Pick<Config, 'secrets'>, did: string, code: string): Promise<boolean> {
  if (normalizeCode(code).length !== 10) return false
  const wanted = codeHash(config, did, code)
  const rows = await db.selectFrom('recovery_code').select('code_hash').where('did', '=', did).where('used_at', 'is', null).execute()
  // compare against every row, so the time taken does not say how many codes are left or which matched
  let hit: string | undefined
  for (const r of rows) if (sameHash(r.code_hash, wanted)) hit = r.code_hash
  if (!hit) return false
  const res = await db
    .updateTable('recovery_code')
    .set({ used_at: new Date().toISOString() })
    .where('did', '=', did)
    .where('code_hash', '=', hit)
    .where('used_at', 'is', null)
    .executeTakeFirst()
  return res.numUpdatedRows === 1n
}

export async function recoveryCodesLeft(db: Store, did: string): Promise<number> {
  const row = await db
    .selectFrom('recovery_code')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('did', '=', did)
    .where('used_at', 'is', null)
    .executeTakeFirst()
  return Number(row?.n ?? 0)
}

/** with neither an authenticator app nor a passkey left there is nothing to recover: drop them */
export async function dropRecoveryCodesIfUnneeded(db: Store, did: string): Promise<void> {
  const totp = await db.selectFrom('totp').select('did').where('did', '=', did).where('confirmed_at', 'is not', null).executeTakeFirst()
  const passkey = await db.selectFrom('passkey').select('did').where('did', '=', did).executeTakeFirst()
  if (!totp && !passkey) await db.deleteFrom('recovery_code').where('did', '=', did).execute()
}
