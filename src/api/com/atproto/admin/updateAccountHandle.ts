// com.atproto.admin.updateAccountHandle: the operator renames an account under the same rules as
// the account's own updateHandle (a domain of this server or one that names the DID, not reserved, unique), with its PLC operation and
// #identity event.
import { method } from '#src/api/method.js'
import { undeletedAccountByDid } from '#src/account/admin-views.js'
import { checkHandleFree, validateHandle } from '#src/account/handles.js'
import { setHandle } from '#src/identity/amend.js'

export default method('com.atproto.admin.updateAccountHandle', ({ db, config, rotationKey, outbound }) => async ({ input }) => {
  const { did } = input.body
  await undeletedAccountByDid(db, did)
  const handle = await validateHandle({ config, outbound }, input.body.handle, did)
  await checkHandleFree(db, did, handle)
  await setHandle(db, did, handle, { rotationKey, plcUrl: config.plcUrl })
})
