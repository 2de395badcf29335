// Writes the licences of the libraries bundled into ../assets/app.js.
const fs = require('fs');
for (const lib of ['preact', 'htm', 'uplot']) {
  const pkg = JSON.parse(fs.readFileSync(`node_modules/${lib}/package.json`, 'utf8'));
  console.log(`== ${lib} ${pkg.version} (${pkg.license})\n`);
  console.log(fs.readFileSync(`node_modules/${lib}/LICENSE`, 'utf8').trim() + '\n');
}
