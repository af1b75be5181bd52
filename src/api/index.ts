// Mounts every handler on the generated server. Each method's auth comes from its registry row,
// injected here, so a handler module only implements the method.
import type { Server } from '../generated/server/index.js'
import type { Services } from '../context.js'
import { createVerifier } from '../auth/verifier.js'
import type { RateLimits } from '../auth/rate-limits.js'
import { onMethodAdded } from '../patches/xrpc-server.js'
import getPreferences from './app/bsky/actor/getPreferences.js'
import putPreferences from './app/bsky/actor/putPreferences.js'
import resolveHandle from './com/atproto/identity/resolveHandle.js'
import createAccount from './com/atproto/server/createAccount.js'
import createSession from './com/atproto/server/createSession.js'
import deleteSession from './com/atproto/server/deleteSession.js'
import describeServer from './com/atproto/server/describeServer.js'
import getServiceAuth from './com/atproto/server/getServiceAuth.js'
import getSession from './com/atproto/server/getSession.js'
import refreshSession from './com/atproto/server/refreshSession.js'
import subscribeRepos from './com/atproto/sync/subscribeRepos.js'
import createAppPassword from './com/atproto/server/createAppPassword.js'
import listAppPasswords from './com/atproto/server/listAppPasswords.js'
import revokeAppPassword from './com/atproto/server/revokeAppPassword.js'
import requestEmailConfirmation from './com/atproto/server/requestEmailConfirmation.js'
import confirmEmail from './com/atproto/server/confirmEmail.js'
import requestEmailUpdate from './com/atproto/server/requestEmailUpdate.js'
import updateEmail from './com/atproto/server/updateEmail.js'
import requestPasswordReset from './com/atproto/server/requestPasswordReset.js'
import resetPassword from './com/atproto/server/resetPassword.js'
import checkAccountStatus from './com/atproto/server/checkAccountStatus.js'
import deactivateAccount from './com/atproto/server/deactivateAccount.js'
import activateAccount from './com/atproto/server/activateAccount.js'
import requestAccountDelete from './com/atproto/server/requestAccountDelete.js'
import deleteAccount from './com/atproto/server/deleteAccount.js'
import createInviteCode from './com/atproto/server/createInviteCode.js'
import createInviteCodes from './com/atproto/server/createInviteCodes.js'
import getAccountInviteCodes from './com/atproto/server/getAccountInviteCodes.js'
import adminUpdateSubjectStatus from './com/atproto/admin/updateSubjectStatus.js'
import adminGetSubjectStatus from './com/atproto/admin/getSubjectStatus.js'
import adminGetAccountInfo from './com/atproto/admin/getAccountInfo.js'
import adminGetAccountInfos from './com/atproto/admin/getAccountInfos.js'
import adminSendEmail from './com/atproto/admin/sendEmail.js'
import adminDisableAccountInvites from './com/atproto/admin/disableAccountInvites.js'
import adminEnableAccountInvites from './com/atproto/admin/enableAccountInvites.js'
import adminUpdateAccountPassword from './com/atproto/admin/updateAccountPassword.js'
import adminDeleteAccount from './com/atproto/admin/deleteAccount.js'
import adminSearchAccounts from './com/atproto/admin/searchAccounts.js'
import adminGetInviteCodes from './com/atproto/admin/getInviteCodes.js'
import adminDisableInviteCodes from './com/atproto/admin/disableInviteCodes.js'
import adminUpdateAccountHandle from './com/atproto/admin/updateAccountHandle.js'
import adminUpdateAccountEmail from './com/atproto/admin/updateAccountEmail.js'
import adminUpdateAccountSigningKey from './com/atproto/admin/updateAccountSigningKey.js'
import tempRevokeAccountCredentials from './com/atproto/temp/revokeAccountCredentials.js'
import identityGetRecommendedDidCredentials from './com/atproto/identity/getRecommendedDidCredentials.js'
import identityResolveDid from './com/atproto/identity/resolveDid.js'
import identityUpdateHandle from './com/atproto/identity/updateHandle.js'
import repoApplyWrites from './com/atproto/repo/applyWrites.js'
import repoCreateRecord from './com/atproto/repo/createRecord.js'
import repoDeleteRecord from './com/atproto/repo/deleteRecord.js'
import repoDescribeRepo from './com/atproto/repo/describeRepo.js'
import repoGetRecord from './com/atproto/repo/getRecord.js'
import repoListRecords from './com/atproto/repo/listRecords.js'
import repoPutRecord from './com/atproto/repo/putRecord.js'
import repoUploadBlob from './com/atproto/repo/uploadBlob.js'
import syncGetBlob from './com/atproto/sync/getBlob.js'
import syncGetBlocks from './com/atproto/sync/getBlocks.js'
import syncGetLatestCommit from './com/atproto/sync/getLatestCommit.js'
import syncGetRecord from './com/atproto/sync/getRecord.js'
import syncGetRepo from './com/atproto/sync/getRepo.js'
import syncGetRepoStatus from './com/atproto/sync/getRepoStatus.js'
import syncListBlobs from './com/atproto/sync/listBlobs.js'
import syncListRepos from './com/atproto/sync/listRepos.js'
import requestAccountMigrate from './com/atproto/server/requestAccountMigrate.js'
import reserveSigningKey from './com/atproto/server/reserveSigningKey.js'
import identityRequestPlcOperationSignature from './com/atproto/identity/requestPlcOperationSignature.js'
import identitySignPlcOperation from './com/atproto/identity/signPlcOperation.js'
import identitySubmitPlcOperation from './com/atproto/identity/submitPlcOperation.js'
import repoImportRepo from './com/atproto/repo/importRepo.js'
import repoListMissingBlobs from './com/atproto/repo/listMissingBlobs.js'
import syncListMissingBlobs from './com/atproto/sync/listMissingBlobs.js'
import tempCheckSignupQueue from './com/atproto/temp/checkSignupQueue.js'
import tempCheckHandleAvailability from './com/atproto/temp/checkHandleAvailability.js'
import identityResolveIdentity from './com/atproto/identity/resolveIdentity.js'
import identityRefreshIdentity from './com/atproto/identity/refreshIdentity.js'
import syncGetHead from './com/atproto/sync/getHead.js'
import syncGetCheckout from './com/atproto/sync/getCheckout.js'

const handlers: ((api: Server, s: Services) => void)[] = [
  createAccount,
  createSession,
  deleteSession,
  describeServer,
  getServiceAuth,
  getSession,
  refreshSession,
  resolveHandle,
  subscribeRepos,
  // accounts: app passwords, email flows, lifecycle, invites, admin
  createAppPassword,
  listAppPasswords,
  revokeAppPassword,
  requestEmailConfirmation,
  confirmEmail,
  requestEmailUpdate,
  updateEmail,
  requestPasswordReset,
  resetPassword,
  checkAccountStatus,
  deactivateAccount,
  activateAccount,
  requestAccountDelete,
  deleteAccount,
  createInviteCode,
  createInviteCodes,
  getAccountInviteCodes,
  adminUpdateSubjectStatus,
  adminGetSubjectStatus,
  adminGetAccountInfo,
  adminGetAccountInfos,
  adminSendEmail,
  adminDisableAccountInvites,
  adminEnableAccountInvites,
  adminUpdateAccountPassword,
  adminDeleteAccount,
  adminSearchAccounts,
  adminGetInviteCodes,
  adminDisableInviteCodes,
  adminUpdateAccountHandle,
  adminUpdateAccountEmail,
  adminUpdateAccountSigningKey,
  tempRevokeAccountCredentials,
  identityGetRecommendedDidCredentials,
  identityResolveDid,
  identityUpdateHandle,
  repoApplyWrites,
  repoCreateRecord,
  repoDeleteRecord,
  repoDescribeRepo,
  repoGetRecord,
  repoListRecords,
  repoPutRecord,
  repoUploadBlob,
  syncGetBlob,
  syncGetBlocks,
  syncGetLatestCommit,
  syncGetRecord,
  syncGetRepo,
  syncGetRepoStatus,
  syncListBlobs,
  syncListRepos,
  getPreferences,
  putPreferences,
  // account migration with a key the destination reserves
  requestAccountMigrate,
  identityRequestPlcOperationSignature,
  identitySignPlcOperation,
  identitySubmitPlcOperation,
  reserveSigningKey,
  repoImportRepo,
  repoListMissingBlobs,
  syncListMissingBlobs,
  // what today's clients call besides: sign-up helpers, full identities, deprecated sync reads
  tempCheckSignupQueue,
  tempCheckHandleAvailability,
  identityResolveIdentity,
  identityRefreshIdentity,
  syncGetHead,
  syncGetCheckout,
]

/** mounts the handlers and returns the method ids they registered */
export function mountApi(api: Server, services: Services, rateLimits?: RateLimits): string[] {
  const mounted: string[] = []
  const claim = (nsid: string) => {
    if (mounted.includes(nsid)) throw new Error(`${nsid} has two handlers`)
    mounted.push(nsid)
  }
  onMethodAdded(api.xrpc, {
    method: (nsid, config) => {
      claim(nsid)
      const rateLimit = rateLimits?.forMethod(nsid)
      return { ...config, auth: createVerifier(nsid, services), ...(rateLimit ? { rateLimit } : {}) }
    },
    stream: (nsid, config) => {
      claim(nsid)
      return { ...config, auth: createVerifier(nsid, services) }
    },
  })
  for (const mount of handlers) mount(api, services)
  return mounted
}
