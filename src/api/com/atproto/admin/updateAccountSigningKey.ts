// com.atproto.admin.updateAccountSigningKey: names another atproto signing key in the account's DID
// document (a PLC operation signed with this server's rotation key, and an #identity event). The
// key this server signs commits with is not changed: the operator uses this when that key lives
// elsewhere, as during a migration or a recovery.
import { parseDidKey } from '@atproto/crypto'
import { method } from '#src/api/method.js'
import { undeletedAccountByDid } from '#src/account/admin-views.js'
import { xrpcError } from '#src/errors.js'
import { setSigningKey } from '#src/identity/amend.js'

export default method('com.atproto.admin.updateAccountSigningKey', ({ db, config, rotationKey }) => async ({ input }) => {
  const { did, signingKey } = input.body
  try {
    parseDidKey(signingKey)
  } catch {
    throw xrpcError('InvalidRequest', 'signingKey must be a did:key of a supported curve')
  }
  const account = await undeletedAccountByDid(db, did)
  await setSigningKey(db, did, signingKey, account.handle, { rotationKey, plcUrl: config.plcUrl })
})
