// com.atproto.server.createSession: identifier (handle, email or DID) and password. Unknown
// identifier and wrong password are the same 401 at the same cost, so a login reveals nothing: the
// main password, then the app passwords (one more hash), or two burnt hashes for an unknown
// identifier.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { burnPasswordCheck, MAX_PASSWORD_LENGTH, verifyPassword } from '../../../../account/password.js'
import { findAccount, sessionView, storeRefreshRecord } from '../../../../account/store.js'
import { mintPair } from '../../../../auth/session-tokens.js'
import { matchLogin } from '../../../../account/app-passwords.js'

export default (api: Server, { db, config, tokenKeys }: Pick<Services, 'db' | 'config' | 'tokenKeys'>) =>
  api.com.atproto.server.createSession<AuthFor<'com.atproto.server.createSession'>>(async ({ input }) => {
    const { identifier, password } = input.body
    // over-long passwords are refused before any hashing, bounding the cost of a request
    if (password.length > MAX_PASSWORD_LENGTH) throw xrpcError('AuthenticationRequired', 'Invalid identifier or password')
    const account = await findAccount(db, identifier)
    let ok = account?.password_hash
      ? await verifyPassword(password, account.password_hash)
      : (await burnPasswordCheck(password), false)
    // then the app passwords, at the cost of one more hash in all
    let appPassword: Awaited<ReturnType<typeof matchLogin>>
    if (!ok) {
      if (account) appPassword = await matchLogin(db, account, password)
      else await burnPasswordCheck(password)
      ok = !!appPassword
    }
    // deleted answers like an unknown identifier; takendown has its own name; deactivated signs in
    if (!account || !ok || account.status === 'deleted') {
      throw xrpcError('AuthenticationRequired', 'Invalid identifier or password')
    }
    if (account.status === 'takendown') throw xrpcError('AccountTakedown', 'Account has been taken down')

    const tokens = await mintPair(tokenKeys, account.did, appPassword, account.credential_gen)
    await storeRefreshRecord(db, {
      jti: tokens.refreshJti,
      did: account.did,
      expiresAt: tokens.refreshExpiresAt,
      appPasswordName: appPassword?.name ?? null,
    })
    return {
      encoding: 'application/json',
      body: {
        accessJwt: tokens.accessJwt,
        refreshJwt: tokens.refreshJwt,
        ...(await sessionView(db, account, config.publicUrl)),
      },
    }
  })
