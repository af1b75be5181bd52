// The pages of /account, on the server's one layout, one module per part (views/): signing in,
// the sections that manage access, second factors, and the page that holds them.
export { SCRIPT_PATH, type AccountView, type Common, type ConnectedAppView, type Flash } from './views/common.js'
export { confirmPage, loginPage, pickerPage, secondFactorPage } from './views/sign-in.js'
export { accountPage, deletedPage } from './views/page.js'
