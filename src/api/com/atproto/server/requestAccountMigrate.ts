// com.atproto.server.requestAccountMigrate: resolve the destination, mark the account
// migrating-out, hand back the 60-minute migration token.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { startMigrationOut } from '../../../../migration/origin.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'tokenKeys' | 'logger' | 'outbound'>) =>
  api.com.atproto.server.requestAccountMigrate<AuthFor<'com.atproto.server.requestAccountMigrate'>>(async ({ auth, input }) => {
    const out = await startMigrationOut(deps, auth.credentials.account, input.body.to)
    return { encoding: 'application/json', body: out }
  })
