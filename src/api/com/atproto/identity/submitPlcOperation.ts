// com.atproto.identity.submitPlcOperation (standard atproto migration): the operation the old
// server signed, checked against this server, stored and published to the PLC directory.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { submitPlcOperation } from '../../../../migration/plc-operation.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'rotationKey' | 'logger'>) =>
  api.com.atproto.identity.submitPlcOperation<AuthFor<'com.atproto.identity.submitPlcOperation'>>(async ({ auth, input }) => {
    await submitPlcOperation(deps, auth.credentials.account, input.body.operation)
  })
