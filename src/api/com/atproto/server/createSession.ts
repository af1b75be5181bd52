// com.atproto.server.createSession: identifier (handle, email or DID) and password, the main one or
// an app password (account/login.ts). Unknown identifier and wrong password are the same 401 at the
// same cost, so a login reveals nothing; the login budgets are spent by the registry row's rate
// limit before this runs.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { login } from '../../../../account/login.js'
import { sessionView, storeRefreshRecord } from '../../../../account/store.js'
import { mintPair } from '../../../../auth/session-tokens.js'

export default (api: Server, { db, config, tokenKeys }: Pick<Services, 'db' | 'config' | 'tokenKeys'>) =>
  api.com.atproto.server.createSession<AuthFor<'com.atproto.server.createSession'>>(async ({ input }) => {
    const { identifier, password } = input.body
    const result = await login(db, { identifier, password, appPasswords: true })
    if (!result.ok) {
      if (result.why === 'takendown') throw xrpcError('AccountTakedown', 'Account has been taken down')
      throw xrpcError('AuthenticationRequired', 'Invalid identifier or password')
    }
    const { account, appPassword } = result

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
