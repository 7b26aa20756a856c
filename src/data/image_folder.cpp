// image_folder.cpp: a folder of the user's images, one subfolder per class, as a dataset
// (torchvision's ImageFolder layout), and the held-out split for data without a test set.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "io/json_limits.h"
#include "mixprec/data/data.h"
#include "mixprec/data/image.h"

namespace mixprec {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The names in dir, sorted (readdir's order depends on the file system), without . entries.
StatusOr<std::vector<std::string>> sorted_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::not_found("image folder '" + dir + "': cannot be opened as a folder");
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool has_image_extension(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

}  // namespace

StatusOr<ImageDataset> load_image_folder(const std::string& dir, const std::vector<std::string>& classes,
                                         int64_t channels, BadSamples* bad) {
  auto entries = sorted_entries(dir);
  if (!entries.is_ok()) return entries.status();
  std::vector<std::string> found;
  for (const std::string& e : *entries)
    if (is_directory(dir + "/" + e)) {
      if (!io::is_valid_utf8(e))  // class names are recorded in config.json and printed by predict
        return Status::data_loss("image folder '" + dir + "': a class folder's name is not UTF-8 text; rename it");
      found.push_back(e);
    }
  if (found.empty())
    return Status::data_loss("image folder '" + dir + "': no class subfolders (expected " + dir +
                                    "/<class>/<image>.png or .jpg, one subfolder per class)");
  const std::vector<std::string>& names = classes.empty() ? found : classes;
  if (names.size() > 256)
    return Status::data_loss(fmt::format("image folder '{}': {} classes, at most 256", dir, names.size()));
  std::map<std::string, int> label_of;
  for (size_t i = 0; i < names.size(); ++i) label_of[names[i]] = int(i);
  for (const std::string& f : found)
    if (!label_of.count(f)) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return Status::data_loss("image folder '" + dir + "': class '" + f +
                                      "' is not one of the training classes (" + list + ")");
    }

  // Decode everything first: whether the images are in colour decides the channels of all.
  struct Item {
    std::string path;
    DecodedImage image;
    int label;
  };
  std::vector<Item> items;
  int64_t ignored = 0, bytes = 0;
  bool colour = false;
  for (const std::string& f : found) {
    const std::string sub = dir + "/" + f;
    auto files = sorted_entries(sub);
    if (!files.is_ok()) return files.status();
    int64_t in_class = 0;
    for (const std::string& name : *files) {
      const std::string path = sub + "/" + name;
      if (!has_image_extension(name) || is_directory(path)) {
        ++ignored;
        continue;
      }
      auto img = decode_image_file(path);
      Status problem = img.status();
      if (img.is_ok() && !items.empty() &&
          (img->width != items[0].image.width || img->height != items[0].image.height))
        problem = Status::data_loss(fmt::format(
            "image folder '{}': {} is {}x{} pixels but {} is {}x{}: every image must have the same size "
            "(mixprec does not resample; resize them first, e.g. with ImageMagick's mogrify -resize WxH!)",
            dir, path, img->width, img->height, items[0].path, items[0].image.width, items[0].image.height));
      if (!problem.is_ok()) {  // --skip-bad: leave the image out, count it
        if (bad == nullptr || !bad->skip || problem.code() != StatusCode::data_loss) return problem;
        bad->record(problem.message());
        continue;
      }
      bytes += img->width * img->height * 3;
      if (bytes > kMaxDatasetBytes)
        return Status::data_loss(fmt::format("image folder '{}': more than {} MiB of pixels", dir,
                                                    kMaxDatasetBytes >> 20));
      colour = colour || img->channels == 3;
      items.push_back({path, std::move(img).value(), label_of[f]});
      ++in_class;
    }
    if (in_class == 0)
      return Status::data_loss("image folder '" + dir + "': class folder '" + f + "' holds no " +
                               (bad != nullptr && bad->count > 0 ? "usable image (--skip-bad" + bad->summary() + ")"
                                                                 : std::string(".png/.jpg/.jpeg image")));
  }

  ImageDataset d;
  d.name = "folder";
  d.channels = channels > 0 ? channels : colour ? 3 : 1;
  d.height = items[0].image.height;
  d.width = items[0].image.width;
  d.count = int64_t(items.size());
  d.num_classes = int(names.size());
  d.class_names = names;
  d.images.reserve(size_t(d.count * d.sample_bytes()));
  for (const Item& it : items) {
    const std::vector<uint8_t> chw = to_chw(it.image, d.channels);
    d.images.insert(d.images.end(), chw.begin(), chw.end());
    d.labels.push_back(uint8_t(it.label));
  }
  d.source = fmt::format("{} ({} images in {} classes{})", dir, d.count, found.size(),
                         ignored ? fmt::format("; {} other files ignored", ignored) : "");
  compute_normalisation(d, d.mean, d.stddev);  // a folder of identical images has std 0
  MIXPREC_RETURN_IF_ERROR(d.validate());
  return d;
}

StatusOr<std::pair<ImageDataset, ImageDataset>> split_off(const ImageDataset& all, double fraction) {
  if (!(fraction > 0 && fraction < 1))
    return Status::invalid_argument(fmt::format("held-out fraction {}: expected one in (0, 1)", fraction));
  const int64_t held = std::max<int64_t>(1, int64_t(double(all.count) * fraction + 0.5));
  if (held >= all.count)
    return Status::invalid_argument(fmt::format("dataset {} has {} samples: too few to hold out {} of them",
                                                all.source, all.count, fraction));
  std::vector<int64_t> order = shuffled_order(all.count, /*seed=*/0, /*epoch=*/0);
  std::vector<bool> is_held(size_t(all.count), false);
  for (int64_t i = 0; i < held; ++i) is_held[size_t(order[size_t(i)])] = true;
  std::pair<ImageDataset, ImageDataset> out{all.subset(0), all.subset(0)};
  const int64_t sb = all.sample_bytes();
  for (int64_t i = 0; i < all.count; ++i) {
    ImageDataset& to = is_held[size_t(i)] ? out.second : out.first;
    if (all.tabular) to.features.insert(to.features.end(), all.sample_features(i), all.sample_features(i) + sb);
    else to.images.insert(to.images.end(), all.image(i), all.image(i) + sb);
    to.labels.push_back(all.labels[size_t(i)]);
    ++to.count;
  }
  out.second.skipped = BadSamples{};  // the file's skipped samples are reported once, with the first part
  out.first.source = fmt::format("{}, {} held out for evaluation", all.source, held);
  out.second.source = fmt::format("{}, the {} held out (--val-split {})", all.source, held, fraction);
  return out;
}

}  // namespace mixprec
