// Refresh-token rotation: the presented record is removed by a conditional delete and its
// successor inserted in the same transaction, so of concurrent presentations exactly one succeeds.
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { mintPair, type TokenKeys } from './session-tokens.js'
import { appPasswordClaim } from './app-passwords.js'
import { storeRefreshRecord, takeRefreshRecord, type AccountRow } from './store.js'

/** spends refresh token `jti` of `account` and mints its successor pair */
export async function rotateRefreshToken(deps: { db: Db; tokenKeys: TokenKeys }, account: AccountRow, jti: string) {
  return deps.db.transact(async (trx) => {
    const taken = await takeRefreshRecord(trx, jti)
    if (!taken) throw xrpcError('ExpiredToken', 'Token has been revoked')
    // the app password name stays with the session through every rotation; a revoked app
    // password's sessions are over
    const apw = taken.app_password_name ? await appPasswordClaim(trx, account.did, taken.app_password_name) : undefined
    if (taken.app_password_name && !apw) throw xrpcError('ExpiredToken', 'Token has been revoked')
    const pair = await mintPair(deps.tokenKeys, account.did, apw, account.credential_gen)
    await storeRefreshRecord(trx, {
      jti: pair.refreshJti,
      did: account.did,
      expiresAt: pair.refreshExpiresAt,
      appPasswordName: taken.app_password_name,
    })
    return pair
  })
}
