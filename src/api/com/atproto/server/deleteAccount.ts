// com.atproto.server.deleteAccount: four proofs (a session, the account's did, its main password and
// the emailed token), checked in this order: `did` mismatch 400 InvalidRequest, wrong MAIN password
// 401 AuthenticationRequired, bad or expired token 400 InvalidToken. The record is kept with status
// deleted; `#account` then `#tombstone`; refresh tokens are not revoked.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { checkMainPassword } from '../../../../account/login.js'
import { deleteWithToken } from '../../../../account/lifecycle.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.deleteAccount<AuthFor<'com.atproto.server.deleteAccount'>>(async ({ auth, input }) => {
    const { account } = auth.credentials
    const { did, password, token } = input.body
    if (did !== account.did) throw xrpcError('InvalidRequest', 'did does not match the authenticated account')
    if (!(await checkMainPassword(account, password)))
      throw xrpcError('AuthenticationRequired', 'Invalid password (app passwords are not accepted here)')
    await deleteWithToken(db, did, token)
  })
