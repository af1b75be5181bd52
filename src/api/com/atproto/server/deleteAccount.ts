// com.atproto.server.deleteAccount: four proofs (a session, the account's did, its main password and
// the emailed token), checked in this order: `did` mismatch 400 InvalidRequest, wrong MAIN password
// 401 AuthenticationRequired, bad or expired token 400 InvalidToken. The record is kept with status
// deleted; `#account` then `#tombstone`; refresh tokens are not revoked.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { checkMainPassword } from '#src/account/login.js'
import { deleteWithToken } from '#src/account/lifecycle.js'

export default method('com.atproto.server.deleteAccount', ({ db, notifySpacesDeleted }) => async ({ auth, input }) => {
  const { account } = auth.credentials
  const { did, password, token } = input.body
  if (did !== account.did) throw xrpcError('InvalidRequest', 'did does not match the authenticated account')
  if (!(await checkMainPassword(account, password)))
    throw xrpcError('AuthenticationRequired', 'Invalid password (app passwords are not accepted here)')
  await deleteWithToken({ db, notifySpacesDeleted }, did, token)
})
