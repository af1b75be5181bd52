// com.atproto.admin.updateAccountHandle: the operator renames an account under the same rules as
// the account's own updateHandle (a domain of this server or one that names the DID, not reserved, unique), with its PLC operation and
// #identity event.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { undeletedAccountByDid } from '../../../../account/admin-views.js'
import { checkHandleFree, validateHandle } from '../../../../account/handles.js'
import { setHandle } from '../../../../identity/amend.js'

export default (api: Server, { db, config, rotationKey, outbound }: Pick<Services, 'db' | 'config' | 'rotationKey' | 'outbound'>) =>
  api.com.atproto.admin.updateAccountHandle<AuthFor<'com.atproto.admin.updateAccountHandle'>>(async ({ input }) => {
    const { did } = input.body
    await undeletedAccountByDid(db, did)
    const handle = await validateHandle({ config, outbound }, input.body.handle, did)
    await checkHandleFree(db, did, handle)
    await setHandle(db, did, handle, { rotationKey, plcUrl: config.plcUrl })
  })
